// Package finetune trains ONNX segmentation networks in Go on ONNX Runtime:
// it compiles the network into a training graph (onnx/grad), feeds it
// augmented batches (finetune/data), steps an optimiser (finetune/optim)
// on the gradients, validates every epoch, keeps atomic checkpoints
// (finetune/checkpoint) and logs the run (finetune/history).
//
// # A run, top down
//
// Train (TrainParallel for several MPI ranks) is the whole run:
//
//   - prepare (trainer.go) opens the run folder (a lock, the checkpoint to
//     resume, mergeResume's check of the flags against it) and calls setup:
//     setupData opens the training and validation sets and fits the
//     object-size classes (size.go); compile builds the training graph —
//     the network with its trainable parameters (models/network), the loss
//     (onnx/grad.Loss: cross entropy, focal, Dice, Lovász; classweights.go)
//     and, with a regularizer, the size head grafted onto a feature tap (sizeregularizer.go's addToGraph, sizehead's surgery) — and
//     setupStepper opens it in a session: a stepper (step.go) whose state
//     lives in Go memory or in the session's device memory
//     (finetune/resident).
//   - run (trainer.go) first validates the base model (validate.go's
//     validateBase: epoch 0, a history.KindBase record), then loops over
//     steps; trainingAugment (contract.go) takes the random rescale about
//     the model's scale factor. Every step goes through
//     Algorithm 1 of docs/method.md, dual.Loop: algorithm1 returns the
//     regularizer's loop, or for a baseline a loop with no dual state.
//     Loop.Step calls back trainStep (step.go): Forward runs the training
//     graph on the batch (stepper.step: loss, gradients, the size scores the
//     dual state needs), summing gradients across ranks (parallel.go, finetune/dataparallel);
//     Update takes the schedule's learning rate and steps the optimiser
//     (stepper.update), then keeps the size head in its box. The dual
//     ascent and the projection happen inside dual.Loop, at the points
//     Algorithm 1 puts them.
//   - At each epoch's end, endEpoch validates (evaluate.go, through
//     inference and metrics), keeps best.ckpt and last.ckpt, writes
//     metrics.jsonl, TensorBoard events and curves.png (finetune/history),
//     and applies early stopping (earlystop.go).
//   - finish exports the best checkpoint as model.onnx (export.go), a clean
//     inference graph carrying the run's settings, and compares the best
//     epoch with the base model (compareWithBase).
//
// Config is the run's configuration, stored in every checkpoint and in
// config.json; Repeat turns a recorded one into a new run.
package finetune
