package audit_test

import (
	"context"
	"os"
	"testing"

	"github.com/connaudit/connaudit/audit"
)

func TestCatalogue(t *testing.T) {
	r, err := audit.NewRunner()
	if err != nil {
		t.Fatal(err)
	}
	rep := r.Run(context.Background(), audit.Catalogue())
	audit.WriteText(os.Stdout, rep, false)
}
