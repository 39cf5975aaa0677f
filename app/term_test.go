package app

import (
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestFitWidth(t *testing.T) {
	line := "  train        step 12 loss=0.41 lr=0.001 acc=0.9 val_loss=0.52 val_acc=0.88 ‖ 损失=1"
	for _, w := range []int{1, 10, 40, 79, 200} {
		got := fitWidth(line, w)
		assert.LessOrEqual(t, utf8.RuneCountInString(got), w, "width %d", w)
	}
	assert.Equal(t, line, fitWidth(line, 0), "no terminal: no limit")
	assert.Equal(t, "  train  …", fitWidth(line, 10))
	t.Setenv("COLUMNS", "33")
	assert.Equal(t, 33, termWidth(nil))
}
