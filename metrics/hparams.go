package metrics

import (
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// HParams reads the hyperparameters an event file holds: the hparams
// plugin's session_start_info (what TensorBoard's HParams dashboard shows,
// written by Keras' hp.KerasCallback, tf.summary's hp.hparams and PyTorch's
// SummaryWriter.add_hparams). Values are float64, string or bool; the last
// session in the file wins. A file without one gives nil.
//
// Fields read: Event.summary=5 → Summary.value=1 → Value.metadata=9 →
// SummaryMetadata.plugin_data=1 → PluginData{plugin_name=1 "hparams",
// content=2} → HParamsPluginData.session_start_info=3 →
// SessionStartInfo.hparams=1 (map<string, google.protobuf.Value>:
// number_value=2, string_value=3, bool_value=4).
func HParams(file []byte) map[string]any {
	var out map[string]any
	for len(file) > 0 {
		data, n, err := nextRecord(file)
		if n == 0 { // incomplete, or the framing is lost
			break
		}
		file = file[n:]
		if err != nil {
			continue
		}
		eachField(data, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
			if num != 5 || typ != protowire.BytesType {
				return nil
			}
			eachField(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
				if num != 1 || typ != protowire.BytesType {
					return nil
				}
				if hp := valueHParams(v); hp != nil {
					out = hp
				}
				return nil
			})
			return nil
		})
	}
	return out
}

func valueHParams(value []byte) map[string]any {
	var content []byte
	eachField(value, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num == 9 && typ == protowire.BytesType { // metadata
			eachField(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
				if num == 1 && typ == protowire.BytesType { // plugin_data
					var name string
					var c []byte
					eachField(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
						switch {
						case num == 1 && typ == protowire.BytesType:
							name = string(v)
						case num == 2 && typ == protowire.BytesType:
							c = v
						}
						return nil
					})
					if name == "hparams" {
						content = c
					}
				}
				return nil
			})
		}
		return nil
	})
	if content == nil {
		return nil
	}
	var out map[string]any
	eachField(content, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num != 3 || typ != protowire.BytesType { // session_start_info
			return nil
		}
		out = map[string]any{}
		eachField(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
			if num != 1 || typ != protowire.BytesType { // hparams map entry
				return nil
			}
			var key string
			var val any
			eachField(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
				switch {
				case num == 1 && typ == protowire.BytesType:
					key = string(v)
				case num == 2 && typ == protowire.BytesType:
					val = protoValue(v)
				}
				return nil
			})
			if key != "" && val != nil {
				out[key] = val
			}
			return nil
		})
		return nil
	})
	return out
}

// protoValue reads a google.protobuf.Value holding a number, a string or
// a bool.
func protoValue(b []byte) any {
	var out any
	eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case num == 2 && typ == protowire.Fixed64Type:
			out = math.Float64frombits(x)
		case num == 3 && typ == protowire.BytesType:
			out = string(v)
		case num == 4 && typ == protowire.VarintType:
			out = x != 0
		}
		return nil
	})
	return out
}
