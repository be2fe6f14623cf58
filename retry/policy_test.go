package retry_test

import (
	"errors"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/connaudit/connaudit/retry"
)

func TestDefaultIsValid(t *testing.T) {
	p := retry.Default()
	require.NoError(t, p.Validate())
	require.Equal(t, 2, p.MaxRetries)
	require.Nil(t, p.Retryable, "nil means DefaultRetryable")
	require.False(t, p.UnsafeRetryNonIdempotent)
	require.NotSame(t, retry.Default().Backoff, p.Backoff, "each Default has its own Backoff")
}

func TestValidate(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		name string
		p    retry.Policy
		want []string // every one must appear
	}{
		{"zero policy", retry.Policy{}, nil},
		{"negative attempt timeout", retry.Policy{AttemptTimeout: -s}, []string{"AttemptTimeout -1s is negative"}},
		{"negative total timeout", retry.Policy{TotalTimeout: -s}, []string{"TotalTimeout -1s is negative"}},
		{"attempt longer than total", retry.Policy{AttemptTimeout: 2 * s, TotalTimeout: s}, []string{"AttemptTimeout 2s is longer than TotalTimeout 1s"}},
		{"attempt equal to total", retry.Policy{AttemptTimeout: s, TotalTimeout: s}, nil},
		{"negative retries", retry.Policy{MaxRetries: -1}, []string{"MaxRetries -1 is negative"}},
		{"negative delay", retry.Policy{Delay: -s}, []string{"Delay -1s is negative"}},
		{"delay fills the budget", retry.Policy{MaxRetries: 1, Delay: s, TotalTimeout: s}, []string{"no retry could ever run"}},
		{"Retry-After without budget", retry.Policy{HonorRetryAfter: true}, []string{"HonorRetryAfter needs a TotalTimeout"}},
		{"multiplier below 1", retry.Policy{Delay: s, Backoff: &retry.Backoff{Multiplier: 0.5}}, []string{"Backoff.Multiplier 0.5"}},
		{"multiplier NaN", retry.Policy{Delay: s, Backoff: &retry.Backoff{Multiplier: math.NaN()}}, []string{"Backoff.Multiplier NaN"}},
		{"cap below delay", retry.Policy{Delay: s, Backoff: &retry.Backoff{Max: s / 2}}, []string{"Backoff.Max 500ms is shorter than Delay 1s"}},
		{"negative cap", retry.Policy{Delay: s, Backoff: &retry.Backoff{Max: -s}}, []string{"Backoff.Max -1s is negative"}},
		{"jitter above 1", retry.Policy{Delay: s, Backoff: &retry.Backoff{Jitter: 1.5}}, []string{"Backoff.Jitter 1.5 is outside [0, 1]"}},
		{"backoff without delay", retry.Policy{Backoff: &retry.Backoff{}}, []string{"Backoff is set but Delay is 0"}},
		{"every problem reported", retry.Policy{AttemptTimeout: -s, MaxRetries: -1, Delay: -s}, []string{"AttemptTimeout", "MaxRetries", "Delay"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Validate()
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, retry.ErrInvalidPolicy)
			for _, w := range tc.want {
				require.ErrorContains(t, err, w)
			}
		})
	}
}

func TestDefaultRetryable(t *testing.T) {
	require.True(t, retry.DefaultRetryable(nil, &http503, nil))
	require.False(t, retry.DefaultRetryable(nil, &http500, nil))
	require.False(t, retry.DefaultRetryable(nil, nil, errors.New("EOF")))
}

var (
	http503 = http.Response{StatusCode: http.StatusServiceUnavailable}
	http500 = http.Response{StatusCode: http.StatusInternalServerError}
)
