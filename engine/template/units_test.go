package template

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseGPUMemory(t *testing.T) {
	cases := []struct {
		in      string
		want    int64
		wantErr string
	}{
		{in: "", want: 0},
		{in: "0", want: 0},
		{in: "2048", want: 2048},
		{in: "512MiB", want: 512},
		{in: "2GiB", want: 2048},
		{in: "2 GiB", want: 2048},
		{in: "2gib", want: 2048},
		{in: "1.5GiB", want: 1536},
		{in: "24Gi", want: 24576},
		{in: "1TiB", want: 1 << 20},
		{in: "1Ti", want: 1 << 20},
		{in: "1024KiB", want: 1},
		{in: "1KiB", want: 1}, // rounded up to a whole MiB
		{in: "1B", want: 1},
		{in: "1.5GB", want: 1431}, // 1.5e9 bytes = 1430.51 MiB, rounded up
		{in: "1GB", want: 954},
		{in: "1G", want: 954},
		{in: "80GB", want: 76294}, // 80e9 / 2^20 = 76293.95
		{in: "1000MB", want: 954},
		{in: "1MB", want: 1},
		{in: "1TB", want: 953675}, // 1e12 / 2^20 = 953674.3
		{in: ".5GiB", want: 512},
		{in: "0.1GiB", want: 103}, // 102.4 exactly, no float error
		{in: " 8GiB ", want: 8192},

		{in: "1.5", wantErr: "a number without a unit means MiB and must be whole"},
		{in: "-1GiB", wantErr: "is not a size"},
		{in: "GiB", wantErr: "is not a size"},
		{in: "lots", wantErr: "is not a size"},
		{in: "1e3MiB", wantErr: "is not a size"},
		{in: "2GW", wantErr: `has an unknown unit "GW"`},
		{in: "2 GiB 3", wantErr: "is not a size"},
		{in: "99999999999TiB", wantErr: "is too large"},
		{in: "99999999999999999999999", wantErr: "is too large"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseGPUMemory(tc.in)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestParseTimeout(t *testing.T) {
	cases := []struct {
		in      string
		want    time.Duration
		wantErr string
	}{
		{in: "", want: 0},
		{in: "0", want: 0},
		{in: "90s", want: 90 * time.Second},
		{in: "30m", want: 30 * time.Minute},
		{in: "2h", want: 2 * time.Hour},
		{in: "1h30m", want: 90 * time.Minute},
		{in: "1.5h", want: 90 * time.Minute},
		{in: "0s", want: 0},
		{in: "30", wantErr: `"30" has no unit; write e.g. 30s, 30m or 30h`},
		{in: "1d", wantErr: "for days use hours, e.g. 48h"},
		{in: "soon", wantErr: "is not a duration"},
		{in: "-5m", wantErr: `"-5m" is negative`},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseTimeout(tc.in)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}
