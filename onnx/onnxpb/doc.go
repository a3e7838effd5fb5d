// Package onnxpb holds the Go types generated from the official ONNX protobuf
// schema (onnx.proto, as shipped by Debian's libonnx-dev 1.12).
//
// Regenerate with protoc and protoc-gen-go on PATH:
//
//	apt-get install protobuf-compiler libonnx-dev
//	go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
//	go generate ./onnx/onnxpb
//
// Fields added to onnx.proto after 1.12 survive a load/save round trip as
// unknown fields, which the protobuf runtime keeps.
//
// Other packages reach these types through package onnx, which names them
// (onnx.NodeProto, onnx.Float32, ...); only onnx imports this one.
package onnxpb

//go:generate protoc --proto_path=. --go_out=. --go_opt=paths=source_relative --go_opt=Monnx.proto=github.com/segtune/segtune/onnx/onnxpb onnx.proto
