package audit

import "github.com/connaudit/connaudit/retry"

// RetryPolicy returns the policy a retry contract gives the retry layer
// under audit ([WithRetry]), and true; false for a scenario that is not a
// retry contract. A client audited from outside the process (connaudit
// serve) is configured from it.
func (s Scenario) RetryPolicy() (retry.Policy, bool) {
	return s.policy, s.Contract != ""
}

// Subject names what a retry contract retries or not, as its verdicts say
// it ("500", "the POST"); empty for a scenario that is not a contract.
func (s Scenario) Subject() string { return s.subject }
