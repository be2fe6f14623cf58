package httptrace

import (
	"context"
	"fmt"
	"net/url"
	"runtime"
	"strings"

	"github.com/connaudit/connaudit/internal/hook"
)

// maxStack is the number of frames kept of where a request was made.
const maxStack = 32

// callers fills buf with the stack of RoundTrip's caller and returns the
// part filled. It is apart so that RoundTrip's frame stays small.
//
//go:noinline
func callers(buf []uintptr) []uintptr {
	// Skip runtime.Callers, callers, begin and RoundTrip.
	return buf[:runtime.Callers(4, buf)]
}

// ignoredFrame reports whether a frame belongs to the machinery between
// the caller and the wire.
func ignoredFrame(fn string) bool {
	for _, pre := range [...]string{"net/http.", "github.com/connaudit/connaudit/httptrace.",
		"github.com/connaudit/connaudit/pool.", "runtime."} {
		if strings.HasPrefix(fn, pre) {
			return true
		}
	}
	return false
}

// Stack returns where the request was made, with [CaptureStacks]: one
// "function\n\tfile:line\n" per frame of the caller's stack outside net/http
// and connaudit, innermost first. It is "" without CaptureStacks.
func (tl *Timeline) Stack() string {
	if tl == nil {
		return ""
	}
	return formatStack(tl.stack)
}

func init() {
	hook.Stack = func(tl any) []uintptr { return tl.(*Timeline).stack }
	hook.FormatStack = formatStack
	hook.Context = func(tl any) context.Context { return tl.(*Timeline).ctx }
	hook.Slot = func(tl any) *any { return &tl.(*Timeline).slot }
	hook.URL = func(tl any) *url.URL { return tl.(*Timeline).url }
}

// formatStack formats pcs as [Timeline.Stack] does.
func formatStack(pcs []uintptr) string {
	if len(pcs) == 0 {
		return ""
	}
	var b strings.Builder
	frames := runtime.CallersFrames(pcs)
	for {
		f, more := frames.Next()
		if !ignoredFrame(f.Function) {
			fmt.Fprintf(&b, "%s\n\t%s:%d\n", f.Function, f.File, f.Line)
		}
		if !more {
			break
		}
	}
	return b.String()
}
