// Package isnil tells a nil value in an interface from a usable one, for
// the constructors and options that refuse nil. It is not API.
package isnil

import "reflect"

// Value reports whether v is nil or holds a nil pointer, map, channel,
// function, interface or slice: a value a constructor must refuse rather
// than fail on at its first use.
func Value(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Chan, reflect.Func, reflect.Interface, reflect.Slice:
		return rv.IsNil()
	}
	return false
}
