package audit

import "github.com/connaudit/connaudit/retry"

// RetryPolicy returns the policy a retry contract gives the retry layer
// under audit ([WithRetry]), and true; false for a scenario that is not a
// retry contract.
func (s Scenario) RetryPolicy() (retry.Policy, bool) {
	return s.Policy.Policy, s.Contract != ""
}
