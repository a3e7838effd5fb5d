package grad

import "github.com/segtune/segtune/onnx"

// WriteNodeRoleForTest is writeRole.
func WriteNodeRoleForTest(n *onnx.NodeProto, r NodeRole) { writeRole(n, r) }
