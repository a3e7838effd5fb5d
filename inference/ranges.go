package inference

import "github.com/segtune/segtune/internal/setting"

// BatchRange is the images a model run takes at once, as a user gives it
// (segment's, eval's and a fine-tune's batch).
var BatchRange = setting.Range{Min: 1, Max: 1 << 16}
