package pool_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/connaudit/connaudit/pool"
)

// TestStatsAddEveryField: Add carries every field of Stats, one at a time
// (a field added to Stats and not to Add fails here), sums counts and
// keeps the larger peak, and empties Scheme as the totals do.
func TestStatsAddEveryField(t *testing.T) {
	typ := reflect.TypeFor[pool.Stats]()
	for f := range typ.Fields() {
		t.Run(f.Name, func(t *testing.T) {
			var one pool.Stats
			v := reflect.ValueOf(&one).Elem().FieldByIndex(f.Index)
			switch {
			case f.Name == "Scheme":
				v.SetString("https")
			case v.Kind() == reflect.Int || v.Kind() == reflect.Int64:
				v.SetInt(3)
			case f.Type == reflect.TypeFor[map[pool.CloseReason]int64]():
				v.Set(reflect.ValueOf(map[pool.CloseReason]int64{pool.ReasonServerEOF: 3}))
			case f.Type == reflect.TypeFor[map[string]int]():
				v.Set(reflect.ValueOf(map[string]int{"GET": 3}))
			case f.Type == reflect.TypeFor[pool.Histogram]():
				b := make([]int64, len(pool.DurationBuckets())+1)
				b[2] = 3
				v.Set(reflect.ValueOf(pool.Histogram{Count: 3, Sum: 3 * time.Millisecond, Buckets: b}))
			default:
				t.Fatalf("a field of a type this test does not fill: %s %s", f.Name, f.Type)
			}
			var sum pool.Stats
			sum.Add(one)
			sum.Add(one)
			got := reflect.ValueOf(sum).FieldByIndex(f.Index).Interface()
			switch f.Name {
			case "Scheme":
				require.Empty(t, got, "a total has no scheme")
			case "MaxOpen":
				require.Equal(t, 3, got, "the larger peak")
			default:
				var twice pool.Stats
				tv := reflect.ValueOf(&twice).Elem().FieldByIndex(f.Index)
				switch x := v.Interface().(type) {
				case int:
					tv.SetInt(int64(2 * x))
				case int64:
					tv.SetInt(2 * x)
				case time.Duration:
					tv.SetInt(int64(2 * x))
				case map[pool.CloseReason]int64:
					tv.Set(reflect.ValueOf(map[pool.CloseReason]int64{pool.ReasonServerEOF: 6}))
				case map[string]int:
					tv.Set(reflect.ValueOf(map[string]int{"GET": 6}))
				case pool.Histogram:
					b := make([]int64, len(x.Buckets))
					b[2] = 6
					tv.Set(reflect.ValueOf(pool.Histogram{Count: 6, Sum: 2 * x.Sum, Buckets: b}))
				}
				require.Equal(t, tv.Interface(), got)
			}
		})
	}
	var none *pool.Stats
	none.Add(pool.Stats{Open: 1}) // a nil sum is no panic
}
