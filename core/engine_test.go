package core

import (
	"errors"
	"testing"

	"github.com/ffrecord/ffrecord/core/internal/engine"
)

// A $FFRECORD_ENGINE naming no engine is the caller's mistake: ErrInvalid, naming the
// variable.
func TestUnknownEngineIsInvalid(t *testing.T) {
	_, err := inCoreTerms(engine.New("bogus"))
	if !errors.Is(err, ErrInvalid) || !errors.Is(err, engine.ErrUnknown) {
		t.Fatalf("err = %v, want ErrInvalid wrapping engine.ErrUnknown", err)
	}
	e, err := inCoreTerms(engine.New("pread"))
	if err != nil || e.Name() != "pread" {
		t.Fatalf("pread: %v, %v", e, err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}
