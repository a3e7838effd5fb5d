// Package samples draws the contact sheet of a fine-tune: the validation
// images with the smallest and the largest objects, each beside its
// ground truth and the predictions of one or more models.
package samples
