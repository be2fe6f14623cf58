package vocab

import (
	"testing"

	"github.com/connaudit/connaudit/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// TestKinds: every kind has its own bit and a unique name; AllKinds holds
// every listed kind and nothing else; a kind not listed has no bit.
func TestKinds(t *testing.T) {
	var all KindSet
	names := map[Kind]bool{}
	for _, k := range Kinds {
		b := Bit(k)
		if b == 0 || b&(b-1) != 0 {
			t.Fatalf("kind %q: bit %b is not one bit", k, b)
		}
		if all&b != 0 {
			t.Fatalf("kind %q shares bit %b", k, b)
		}
		all |= b
		if names[k] {
			t.Fatalf("duplicate kind %q", k)
		}
		names[k] = true
	}
	if all != AllKinds {
		t.Fatalf("AllKinds %b, listed kinds %b", AllKinds, all)
	}
	if Bit("nope") != 0 || AllKinds.Has("nope") || AllKinds.Has("") {
		t.Fatal("a kind not listed has a bit")
	}
	s := Of(KindGetConn, KindDone, "nope")
	if !s.Has(KindGetConn) || !s.Has(KindDone) || s.Has(KindGotConn) || s != Of(KindDone, KindGetConn) {
		t.Fatalf("Of: %b", s)
	}
}

// TestSideOf: the reasons listed as the server's are the server's, the
// others the client's.
func TestSideOf(t *testing.T) {
	server := []CloseReason{ReasonConnectionClose, ReasonHTTP10, ReasonServerClosedIdle, ReasonServerEOF,
		ReasonServerReset, ReasonServerGoAway}
	client := []CloseReason{ReasonIdleTimeout, ReasonEarlyBodyClose, ReasonCloseIdle, ReasonIdlePoolFull,
		ReasonRequestError, ReasonHandshakeFailed, ReasonHandshakeAbandon, ReasonKeepAlivesOff, ReasonClient,
		ReasonProtocolError, ReasonH2Unused}
	for _, r := range server {
		if SideOf(r) != ClosedByServer {
			t.Errorf("%s: %s", r, SideOf(r))
		}
	}
	for _, r := range client {
		if SideOf(r) != ClosedByClient {
			t.Errorf("%s: %s", r, SideOf(r))
		}
	}
}
