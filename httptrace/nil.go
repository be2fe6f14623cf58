package httptrace

import "reflect"

// isNil reports whether v is nil or holds a nil pointer, map, channel,
// function or slice: a value a constructor must refuse rather than fail
// on at its first use.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Chan, reflect.Func, reflect.Interface, reflect.Slice:
		return rv.IsNil()
	}
	return false
}
