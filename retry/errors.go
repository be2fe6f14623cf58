package retry

import "errors"

// ErrBodyNotRewindable is returned (wrapped) when an outcome would be retried
// but the request body cannot be sent again: the request has a body and no
// [http.Request.GetBody], or GetBody failed. The request was sent once and
// not retried. Test for it with [errors.Is].
var ErrBodyNotRewindable = errors.New("retry: request body cannot be rewound for a retry")

// ErrInvalidPolicy is wrapped by every error of [Policy.Validate], and by the
// error [Policy.Do] returns for an invalid policy or a nil client or request.
var ErrInvalidPolicy = errors.New("retry: invalid policy")
