package grad

import (
	"errors"
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/onnx"
)

// foldLimit bounds the element count of a constant subgraph result folded
// into an initializer; larger constant results stay computed at run time.
const foldLimit = 1 << 16

// Graphs is what Build produces.
type Graphs struct {
	// Training computes the loss, the model's outputs, the extra outputs and
	// one gradient per trainable parameter.
	Training *onnx.Model
	// Eval computes the loss, the model's outputs and the extra outputs, with
	// the same inputs as Training minus the gradient-only ones.
	Eval *onnx.Model
	// Params holds the trainable parameters' initial values, in input order.
	Params   []*onnx.TensorProto
	Manifest Manifest
}

// compiler holds the state of one Build.
type compiler struct {
	cfg       Config
	m         *onnx.ModelProto
	g         *onnx.GraphProto
	opset     int64
	floatType int32
	info      map[string]*tensorInfo
	inits     map[string]*onnx.TensorProto
	trainable []string
	isTrain   map[string]bool
	inputs    []string // the model's real graph inputs
	names     map[string]bool
	b         *builder
	// lossOn and classAxis are the tensor the loss reads and its class axis.
	lossOn    string
	classAxis int
	// madeConst holds initializers the compiler created (Constant nodes,
	// upgrade constants): never trainable.
	madeConst map[string]bool
	// producer maps each forward tensor to its node (roles.go).
	producer map[string]*onnx.NodeProto
}

// Build compiles model into training and evaluation graphs. The model is not
// modified. See the package documentation for the graphs' conventions.
func Build(model *onnx.Model, cfg Config) (*Graphs, error) {
	if model == nil || model.Proto == nil || model.Proto.Graph == nil {
		return nil, errors.New("grad: no model graph")
	}
	c := &compiler{cfg: cfg, m: model.Clone().Proto}
	c.g = c.m.Graph
	if err := c.prepare(); err != nil {
		return nil, fmt.Errorf("grad: %w", err)
	}
	gs, err := c.emit()
	if err != nil {
		return nil, fmt.Errorf("grad: %w", err)
	}
	return gs, nil
}

// prepare normalises the forward graph: opset, constants, trainables,
// static shapes (probed) and folded shape computations.
func (c *compiler) prepare() error {
	c.opset = -1
	for _, o := range c.m.OpsetImport {
		if o.GetDomain() == "" || o.GetDomain() == "ai.onnx" {
			c.opset = o.GetVersion()
		}
	}
	if c.opset < 0 {
		return errors.New("the model imports no default-domain opset")
	}
	if c.opset < 7 {
		return &UnsupportedError{What: fmt.Sprintf("opset %d is too old (7 or newer is supported)", c.opset)}
	}
	if len(c.g.GetNode()) == 0 {
		return errors.New("the model graph has no nodes")
	}
	for _, n := range c.g.Node {
		if hasSubgraph(n) {
			// A branch reads outer tensors the compiler does not track: it
			// could neither probe, fold nor differentiate it correctly.
			return &UnsupportedError{Node: n.GetName(), Op: n.GetOpType(), What: "nodes with subgraphs (If, Loop, Scan) are not supported"}
		}
	}
	c.names = map[string]bool{}
	for _, n := range c.g.Node {
		for _, x := range slices.Concat(n.Input, n.Output) {
			c.names[x] = true
		}
	}
	for _, t := range c.g.Initializer {
		c.names[t.GetName()] = true
	}
	for _, v := range slices.Concat(c.g.Input, c.g.Output) {
		c.names[v.GetName()] = true
	}
	taken := func(s string) bool { return c.names[s] }
	c.floatType = int32(onnx.Float32)
	for _, v := range c.g.Input {
		if dt := v.GetType().GetTensorType().GetElemType(); dt == int32(onnx.Float64) {
			c.floatType = dt
		}
	}
	c.b = newBuilder("bwd/", c.floatType, taken)
	c.b.matrixReductions = c.cfg.MatrixReductions

	c.madeConst = map[string]bool{}
	orig := map[string]bool{}
	for _, t := range c.g.Initializer {
		orig[t.GetName()] = true
	}
	if err := upgrade(c.g, c.opset, newBuilder("upgrade/", c.floatType, taken)); err != nil {
		return err
	}
	if c.cfg.MinOpset >= 21 && c.opset < 21 && slices.ContainsFunc(c.g.Node, isGroupNorm) {
		// GroupNormalization-21 scales per channel where 18 scales per
		// group: the same node means another thing at the higher opset.
		return &UnsupportedError{What: fmt.Sprintf("GroupNormalization at opset %d cannot be declared at opset %d (its scale and bias changed from per group to per channel at 21); export the model at opset 21 or newer", c.opset, c.cfg.MinOpset)}
	}
	c.opset = max(c.opset, targetOpset, c.cfg.MinOpset)
	imports := []*onnx.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(c.opset)}}
	for _, o := range c.m.OpsetImport {
		if o.GetDomain() != "" && o.GetDomain() != "ai.onnx" {
			imports = append(imports, o)
		}
	}
	c.m.OpsetImport = imports
	if c.m.GetIrVersion() < 8 {
		c.m.IrVersion = proto.Int64(8)
	}
	if err := c.constantsToInitializers(); err != nil {
		return err
	}
	if err := sortNodes(c.g); err != nil {
		return err
	}
	c.inits = map[string]*onnx.TensorProto{}
	for _, t := range c.g.Initializer {
		c.inits[t.GetName()] = t
	}
	var ins []*onnx.ValueInfoProto
	for _, v := range c.g.Input {
		if _, ok := c.inits[v.GetName()]; !ok { // IR < 4 lists initializers as inputs
			ins = append(ins, v)
			c.inputs = append(c.inputs, v.GetName())
		}
	}
	c.g.Input = ins
	for _, t := range c.g.Initializer {
		if !orig[t.GetName()] {
			c.madeConst[t.GetName()] = true
		}
	}
	if err := c.selectTrainable(); err != nil {
		return err
	}
	if err := c.probeAndFold(); err != nil {
		return err
	}
	c.trimDeadTaps()
	c.winogradConvs()
	return nil
}

// constantsToInitializers turns Constant nodes into initializers.
func (c *compiler) constantsToInitializers() error {
	var keep []*onnx.NodeProto
	for _, n := range c.g.Node {
		if n.GetOpType() != "Constant" || (n.GetDomain() != "" && n.GetDomain() != "ai.onnx") {
			keep = append(keep, n)
			continue
		}
		if len(n.Output) != 1 {
			return fmt.Errorf("Constant node %q has %d outputs", n.GetName(), len(n.Output))
		}
		name := n.Output[0]
		var t *onnx.TensorProto
		switch a := n.GetAttribute(); {
		case len(a) != 1:
			return fmt.Errorf("Constant node %q needs exactly one attribute", n.GetName())
		case a[0].GetName() == "value":
			t = proto.Clone(a[0].GetT()).(*onnx.TensorProto)
		case a[0].GetName() == "value_float":
			t = onnx.NewFloat32Tensor("", nil, []float32{a[0].GetF()})
		case a[0].GetName() == "value_floats":
			t = onnx.NewFloat32Tensor("", []int64{int64(len(a[0].GetFloats()))}, a[0].GetFloats())
		case a[0].GetName() == "value_int":
			t = onnx.NewInt64Tensor("", nil, []int64{a[0].GetI()})
		case a[0].GetName() == "value_ints":
			t = onnx.NewInt64Tensor("", []int64{int64(len(a[0].GetInts()))}, a[0].GetInts())
		default:
			return &UnsupportedError{Node: n.GetName(), Op: "Constant", What: fmt.Sprintf("attribute %q is not supported (value, value_float(s) and value_int(s) are)", a[0].GetName())}
		}
		if t == nil {
			return fmt.Errorf("Constant node %q has no value", n.GetName())
		}
		t.Name = proto.String(name)
		c.g.Initializer = append(c.g.Initializer, t)
	}
	c.g.Node = keep
	return nil
}

// selectTrainable resolves the Trainable patterns.
func (c *compiler) selectTrainable() error {
	pats, err := compilePatterns(c.cfg.Trainable)
	if err != nil {
		return err
	}
	hits := make([]int, len(pats))
	c.isTrain = map[string]bool{}
	// Patterns select parameters only (onnx.ParameterNames): "*" must not
	// pick up a Resize's scales or GELU's constants. A literal name selects
	// the float initializer it names, whatever consumes it.
	params := onnx.ParameterNames(c.g)
	for _, t := range c.g.Initializer {
		if !trainableType(t.GetDataType()) || c.madeConst[t.GetName()] {
			continue
		}
		for i, re := range pats {
			if !params[t.GetName()] && !isLiteral(c.cfg.Trainable[i]) {
				continue
			}
			if re.MatchString(t.GetName()) {
				hits[i]++
				if !c.isTrain[t.GetName()] {
					c.isTrain[t.GetName()] = true
					c.trainable = append(c.trainable, t.GetName())
				}
			}
		}
	}
	for i, h := range hits {
		if h == 0 {
			return c.selectsNothing(c.cfg.Trainable[i])
		}
	}
	if len(c.trainable) == 0 {
		return errors.New("no trainable parameters selected")
	}
	return c.widenHalfParams()
}

// trainableType reports the element types a parameter may be stored in:
// float16 and bfloat16 ones train as float32 masters (widenHalfParams).
func trainableType(dt int32) bool {
	switch onnx.DataType(dt) {
	case onnx.Float32, onnx.Float64, onnx.Float16, onnx.BFloat16:
		return true
	}
	return false
}

// selectsNothing is the error of Trainable entry p, which selects nothing.
// A literal entry is usually a caller's exact-name pattern
// ("re:"+QuoteMeta(name)) that its user never wrote: the error names the
// tensor and what it is, not the pattern.
func (c *compiler) selectsNothing(p string) error {
	if !isLiteral(p) {
		return &UnsupportedError{What: fmt.Sprintf("trainable pattern %q matches no parameter (%s)", p, onnx.ParameterRule)}
	}
	name := literalName(p)
	var t *onnx.TensorProto
	for _, x := range c.g.Initializer {
		if x.GetName() == name {
			t = x
		}
	}
	switch {
	case t == nil:
		return &UnsupportedError{What: fmt.Sprintf("the model has no initializer %q to train", name)}
	case c.madeConst[name]:
		return &UnsupportedError{What: fmt.Sprintf("%q is a Constant node's value, not a stored weight: it cannot train", name)}
	}
	return &UnsupportedError{What: fmt.Sprintf("initializer %q holds %s values, which cannot train (float32, float64, float16 and bfloat16 weights can)",
		name, onnx.DataType(t.GetDataType()))}
}

// widenHalfParams turns each float16 or bfloat16 parameter into a float32
// master of the same name, which the training graph takes as its input.
// A consumer that casts the stored weight to float32 (how exporters write
// fp16-stored models that compute in float32) reads the master directly,
// so its forward value at the start is the stored one and its gradient
// stays float32 (a half gradient would flush small values to zero); any
// other consumer reads a Cast of the master back to the stored type. The
// caller writes the updated master back in the model's own storage type
// (onnx.SetFloat32s rounds it).
func (c *compiler) widenHalfParams() error {
	var casts []*onnx.NodeProto
	for _, name := range c.trainable {
		t := c.inits[name]
		dt := t.GetDataType()
		if dt != int32(onnx.Float16) && dt != int32(onnx.BFloat16) {
			continue
		}
		for _, o := range c.g.Output {
			if o.GetName() == name {
				return fmt.Errorf("parameter %q is also a graph output, which a %s parameter cannot be while it trains as float32", name, onnx.DataType(dt))
			}
		}
		v, err := onnx.Float32s(t)
		if err != nil {
			return fmt.Errorf("initializer %q: %w", name, err)
		}
		stored := ""
		for _, n := range c.g.Node {
			if n.GetOpType() == "Cast" && attrInt(n, "to", 0) == int64(onnx.Float32) {
				continue // reads the master: Cast to float32 of float32
			}
			for i, x := range n.Input {
				if x != name {
					continue
				}
				if stored == "" {
					stored = c.unique(name + "/stored")
					casts = append(casts, &onnx.NodeProto{Name: proto.String(stored), OpType: proto.String("Cast"),
						Input: []string{name}, Output: []string{stored}, Attribute: []*onnx.AttributeProto{onnx.IntAttr("to", int64(dt))}})
				}
				n.Input[i] = stored
			}
		}
		master := onnx.NewFloat32Tensor(name, t.GetDims(), v)
		c.inits[name] = master
		for i, x := range c.g.Initializer {
			if x == t {
				c.g.Initializer[i] = master
			}
		}
	}
	c.g.Node = append(casts, c.g.Node...)
	return nil
}

// unique returns base, or base with a numeric suffix, unused in the graph,
// and reserves it.
func (c *compiler) unique(base string) string {
	name := base
	for i := 1; c.names[name]; i++ {
		name = fmt.Sprintf("%s_%d", base, i)
	}
	c.names[name] = true
	return name
}

// inputShape returns the static training shape of graph input v.
func (c *compiler) inputShape(v *onnx.ValueInfoProto) ([]int64, error) {
	if s, ok := c.cfg.InputShapes[v.GetName()]; ok {
		for _, d := range s {
			if d <= 0 {
				return nil, fmt.Errorf("input %q: shape %v must be static and positive", v.GetName(), s)
			}
		}
		decl := v.GetType().GetTensorType().GetShape().GetDim()
		if decl != nil && len(decl) != len(s) {
			return nil, fmt.Errorf("input %q: shape %v has rank %d, the model declares rank %d", v.GetName(), s, len(s), len(decl))
		}
		for i, d := range decl {
			if d.GetDimParam() == "" && d.GetDimValue() > 0 && d.GetDimValue() != s[i] {
				return nil, fmt.Errorf("input %q: shape %v conflicts with the declared dimension %d = %d", v.GetName(), s, i, d.GetDimValue())
			}
		}
		return append([]int64{}, s...), nil
	}
	tt := v.GetType().GetTensorType()
	if tt.GetShape() == nil {
		return nil, fmt.Errorf("input %q has no declared shape; give it in InputShapes", v.GetName())
	}
	var s []int64
	for _, d := range tt.GetShape().GetDim() {
		if d.GetDimValue() <= 0 {
			return nil, fmt.Errorf("input %q has a dynamic dimension; give its training shape in InputShapes", v.GetName())
		}
		s = append(s, d.GetDimValue())
	}
	return s, nil
}

// probeAndFold fixes the input shapes, probes every tensor's shape and
// folds constant subgraphs (shape arithmetic, Resize sizes) into initializers.
func (c *compiler) probeAndFold() error {
	feeds := map[string]*ProbeTensor{}
	for name := range c.cfg.InputShapes {
		if !slices.Contains(c.inputs, name) {
			return fmt.Errorf("InputShapes names %q, which is not a model input", name)
		}
	}
	for _, v := range c.g.Input {
		s, err := c.inputShape(v)
		if err != nil {
			return err
		}
		dt := v.GetType().GetTensorType().GetElemType()
		f, err := zeroFeed(dt, s)
		if err != nil {
			return fmt.Errorf("input %q: %w", v.GetName(), err)
		}
		feeds[v.GetName()] = f
		setValueInfo(v, dt, s)
	}
	// A tensor is constant when it does not depend on graph inputs or
	// trainable parameters; Shape and Size are constant once shapes are.
	isConst := map[string]bool{}
	for name := range c.inits {
		if !c.isTrain[name] {
			isConst[name] = true
		}
	}
	want := map[string]bool{}
	for _, n := range c.g.Node {
		// Subgraphs read outer tensors that n.Input does not list.
		cst := len(n.Input) > 0 && !isRandom(n.GetOpType()) && !hasSubgraph(n)
		for _, x := range n.Input {
			if x != "" && !isConst[x] {
				cst = false
			}
		}
		if op := n.GetOpType(); op == "Shape" || op == "Size" {
			cst = true
		}
		if cst {
			for _, o := range n.Output {
				if o != "" {
					isConst[o] = true
					want[o] = true
				}
			}
		}
	}
	// Trainable parameters are fed as inputs during the probe, as in the
	// training graph (and some bindings cannot run a graph without inputs).
	pg := proto.Clone(c.g).(*onnx.GraphProto)
	var frozen []*onnx.TensorProto
	for _, t := range pg.Initializer {
		if !c.isTrain[t.GetName()] || len(t.GetDims()) == 0 {
			frozen = append(frozen, t) // rank-0 values cannot be fed through the binding
			continue
		}
		v, err := onnx.Float64s(t)
		if err != nil {
			return fmt.Errorf("initializer %q: %w", t.GetName(), err)
		}
		if t.GetDataType() == int32(onnx.Float64) {
			feeds[t.GetName()] = &ProbeTensor{DataType: int32(onnx.Float64), Shape: t.GetDims(), Float64: v}
		} else {
			f := make([]float32, len(v))
			for i, x := range v {
				f[i] = float32(x)
			}
			feeds[t.GetName()] = &ProbeTensor{DataType: int32(onnx.Float32), Shape: t.GetDims(), Float32: f}
		}
		pg.Input = append(pg.Input, valueInfo(t.GetName(), t.GetDataType(), t.GetDims()))
	}
	pg.Initializer = frozen
	info, vals, err := probe(c.cfg.Prober, pg, c.m.OpsetImport, c.m.GetIrVersion(), feeds, want)
	if err != nil {
		return err
	}
	c.info = info
	for _, v := range c.g.Input {
		s := feeds[v.GetName()].Shape
		c.info[v.GetName()] = &tensorInfo{shape: s, dtype: v.GetType().GetTensorType().GetElemType()}
	}
	for name, t := range c.inits {
		c.info[name] = &tensorInfo{shape: append([]int64{}, t.GetDims()...), dtype: t.GetDataType()}
	}
	var keep []*onnx.NodeProto
	for _, n := range c.g.Node {
		folded := true
		for _, o := range n.Output {
			if o == "" {
				continue
			}
			t, ok := vals[o]
			if !ok || numel(t.GetDims()) > foldLimit {
				folded = false
			}
		}
		if !folded {
			keep = append(keep, n)
			continue
		}
		for _, o := range n.Output {
			if o != "" {
				c.g.Initializer = append(c.g.Initializer, vals[o])
				c.inits[o] = vals[o]
			}
		}
	}
	c.g.Node = keep
	return nil
}

// hasSubgraph reports whether n has a graph-valued attribute.
func hasSubgraph(n *onnx.NodeProto) bool {
	for _, a := range n.Attribute {
		if a.G != nil || len(a.Graphs) > 0 {
			return true
		}
	}
	return false
}

func isRandom(op string) bool {
	switch op {
	case "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli":
		return true
	}
	return false
}

// setValueInfo stamps a static tensor type on v.
func setValueInfo(v *onnx.ValueInfoProto, dt int32, shape []int64) {
	dims := make([]*onnx.Dimension, len(shape))
	for i, d := range shape {
		dims[i] = &onnx.Dimension{Value: &onnx.DimValue{DimValue: d}}
	}
	v.Type = &onnx.TypeProto{Value: &onnx.TensorTypeValue{TensorType: &onnx.TensorTypeProto{
		ElemType: proto.Int32(dt), Shape: &onnx.TensorShapeProto{Dim: dims},
	}}}
}

func valueInfo(name string, dt int32, shape []int64) *onnx.ValueInfoProto {
	v := &onnx.ValueInfoProto{Name: proto.String(name)}
	setValueInfo(v, dt, shape)
	return v
}

// sortNodes orders the graph's nodes topologically (ONNX requires it, but
// not every exporter or edit keeps it).
func sortNodes(g *onnx.GraphProto) error {
	producer := map[string]int{}
	for i, n := range g.Node {
		for _, o := range n.Output {
			if o != "" {
				producer[o] = i
			}
		}
	}
	state := make([]int8, len(g.Node)) // 0 new, 1 visiting, 2 done
	order := make([]*onnx.NodeProto, 0, len(g.Node))
	var visit func(i int) error
	visit = func(i int) error {
		switch state[i] {
		case 1:
			return fmt.Errorf("the graph has a cycle through node %q", g.Node[i].GetName())
		case 2:
			return nil
		}
		state[i] = 1
		for _, x := range g.Node[i].Input {
			if p, ok := producer[x]; ok && x != "" {
				if err := visit(p); err != nil {
					return err
				}
			}
		}
		state[i] = 2
		order = append(order, g.Node[i])
		return nil
	}
	for i := range g.Node {
		if err := visit(i); err != nil {
			return err
		}
	}
	g.Node = order
	return nil
}

func isGroupNorm(n *onnx.NodeProto) bool {
	return n.GetOpType() == "GroupNormalization" && (n.GetDomain() == "" || n.GetDomain() == "ai.onnx")
}
