// Package finetune trains ONNX segmentation networks in Go on ONNX Runtime:
// it compiles the network into a training graph (onnx/grad), feeds it
// augmented batches (finetune/data), steps an optimiser (finetune/optim)
// on the gradients, validates every epoch, keeps atomic checkpoints
// (finetune/checkpoint) and logs the run (finetune/history).
//
// # A run, top down
//
// Train (TrainParallel for several MPI ranks) is the whole run. The root
// runs the loop around the graphs and never touches one: the graph side
// (the training graph, its sessions, the size regularizer's state and the
// validation scorer) is finetune/trainer's Net, and a checkpoint's
// inference model finetune/export's.
//
//   - prepare (trainer.go) opens the run folder (a lock, the checkpoint to
//     resume, mergeResume's check of the flags against it) and calls setup:
//     setupData loads the base network (export.NetworkSpec) into a
//     trainer.Net, which reads its contract; it opens the training and
//     validation sets and fits the object-size classes (size.go). Net.Build
//     then compiles the training graph — the network with its trainable
//     parameters (models/network), the loss (onnx/grad.Loss: cross entropy,
//     focal, Dice, Lovász; the weights from classweights.go) and, with a
//     regularizer, the size head grafted onto a feature tap
//     (trainer/regularizer.go, sizehead's surgery) — and opens it in a
//     session: a stepper (trainer/step.go) whose state lives in Go memory
//     or in the session's device memory (finetune/resident).
//   - run (trainer.go) first validates the base model (epochval.go's
//     validateBase: epoch 0, a history.KindBase record), then loops over
//     steps; trainingAugment (contract.go) takes the random rescale about
//     the model's scale factor. Every step goes through Algorithm 1 of
//     docs/method.md, dual.Loop: Net.Loop returns the regularizer's loop,
//     or for a baseline a loop with no dual state. Net.Step hands the loop
//     the step: Forward runs the training graph on the batch (the loss,
//     gradients, the size scores the dual state needs), summing gradients
//     across ranks (finetune/dataparallel); Update takes the schedule's
//     learning rate and steps the optimiser, then keeps the size head in
//     its box. The dual ascent and the projection happen inside dual.Loop,
//     at the points Algorithm 1 puts them.
//   - At each epoch's end, endEpoch validates (epochval.go, scoring with
//     trainer.Evaluate through inference and metrics), keeps best.ckpt and
//     last.ckpt, writes metrics.jsonl, TensorBoard events and curves.png
//     (finetune/history), and applies early stopping (earlystop.go).
//   - finish exports the best checkpoint as model.onnx (export.go, through
//     finetune/export), a clean inference graph carrying the run's
//     settings, and compares the best epoch with the base model
//     (compareWithBase).
//
// Config is the run's configuration, stored in every checkpoint and in
// config.json; Repeat turns a recorded one into a new run.
package finetune
