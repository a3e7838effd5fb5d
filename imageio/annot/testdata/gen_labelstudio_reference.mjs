// Writes labelstudio_export.json, a Label Studio JSON export with brush
// results, and labelstudio_expected.json, the masks it stands for, for the
// tests of package annot. The brush RLE is made by @thi.ng/rle-pack's
// encode(rgba, rgba.length), as Label Studio's editor encodes a brush
// layer's RGBA pixels (word size 8, run sizes [3, 4, 8, 16]):
//
//   npm install @thi.ng/rle-pack
//   node gen_labelstudio_reference.mjs
//
// A pixel is drawn where the layer's alpha is at least 128; masks paint
// the results in order: background 0, then the labels sorted (Cat 1, Dog 2).
import { encode } from "@thi.ng/rle-pack";
import { writeFileSync } from "node:fs";

let seed = 28;
const rand = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);

// layer returns the RGBA bytes of a w×h brush layer of colour rgb whose
// alpha at (x, y) is alpha(x, y).
function layer(w, h, rgb, alpha) {
  const px = new Uint8Array(w * h * 4);
  for (let y = 0; y < h; y++)
    for (let x = 0; x < w; x++) {
      const a = alpha(x, y), i = 4 * (y * w + x);
      if (a > 0) { px[i] = rgb[0]; px[i + 1] = rgb[1]; px[i + 2] = rgb[2]; }
      px[i + 3] = a;
    }
  return px;
}

// A disc with a soft (anti-aliased) edge, as a round brush draws it.
const disc = (cx, cy, r) => (x, y) => {
  const d = Math.hypot(x + 0.5 - cx, y + 0.5 - cy);
  return Math.max(0, Math.min(255, Math.round((r + 1 - d) * 128)));
};
const rect = (x0, y0, x1, y1) => (x, y) => (x >= x0 && x < x1 && y >= y0 && y < y1 ? 255 : 0);

let resultID = 0;
function brush(w, h, label, alpha) {
  const rgb = label === "Cat" ? [250, 50, 83] : [36, 179, 83];
  const px = layer(w, h, rgb, alpha);
  return {
    result: {
      original_width: w, original_height: h, image_rotation: 0,
      value: { format: "rle", rle: Array.from(encode(px, px.length)), brushlabels: [label] },
      id: "r" + ++resultID, from_name: "tag", to_name: "image", type: "brushlabels", origin: "manual",
    },
    px,
  };
}

function task(id, name, annotations) {
  return {
    id, annotations, drafts: [], predictions: [], file_upload: name,
    data: { image: "/data/upload/1/" + name },
    meta: {}, created_at: "2024-01-01T00:00:00.000000Z", updated_at: "2024-01-01T00:00:00.000000Z",
    inner_id: id, total_annotations: annotations.length, cancelled_annotations: 0,
    total_predictions: 0, comment_count: 0, unresolved_comment_count: 0,
    last_comment_updated_at: null, project: 1, updated_by: 1, comment_authors: [],
  };
}

function annotation(id, brushes, extra = {}) {
  return {
    id, completed_by: 1, result: brushes.map((b) => b.result), was_cancelled: false,
    ground_truth: false, created_at: "2024-01-01T00:00:00.000000Z", updated_at: "2024-01-01T00:00:00.000000Z",
    draft_created_at: null, lead_time: 12.5, prediction: {}, result_count: brushes.length,
    unique_id: "u" + id, import_id: null, last_action: null, task: 0, project: 1,
    updated_by: 1, parent_prediction: null, parent_annotation: null, last_created_by: null, ...extra,
  };
}

const classOf = { Cat: 1, Dog: 2 };
function expect(w, h, brushes) {
  const m = new Array(w * h).fill(0);
  for (const b of brushes)
    for (let i = 0; i < w * h; i++) if (b.px[4 * i + 3] >= 128) m[i] = classOf[b.result.value.brushlabels[0]];
  const rows = [];
  for (let y = 0; y < h; y++) rows.push(m.slice(y * w, y * w + w).join(""));
  return rows;
}

const tasks = [], expected = {};
function add(id, name, w, h, brushes, extra = []) {
  const ann = annotation(100 + id, brushes);
  ann.result.push(...extra);
  tasks.push(task(id, name, [ann]));
  expected["/data/upload/1/" + name] = { width: w, height: h, rows: expect(w, h, brushes) };
}

// Overlapping brushes, soft edges: the later brush wins.
add(1, "a1b2c3d4-small.png", 20, 15,
  [brush(20, 15, "Cat", disc(8, 7, 5)), brush(20, 15, "Dog", rect(10, 4, 18, 12))],
  [{ value: { choices: ["indoor"] }, id: "c1", from_name: "scene", to_name: "image", type: "choices", origin: "manual" }]);
// Long runs (several 2^16 chunks) and literal stretches (noise).
add(2, "e5f6a7b8-large.jpg", 200, 150, [
  brush(200, 150, "Dog", rect(10, 10, 40, 30)),
  brush(200, 150, "Cat", (x, y) => (y >= 120 && y < 124 && rand() < 0.5 ? Math.floor(rand() * 256) : 0)),
]);
// A one-pixel image.
add(3, "c9d0e1f2-dot.png", 1, 1, [brush(1, 1, "Cat", () => 200)]);
// A cancelled annotation first: the next one is used.
{
  const b = [brush(6, 4, "Dog", rect(1, 1, 4, 3))];
  const cancelled = annotation(90, [brush(6, 4, "Cat", rect(0, 0, 6, 4))], { was_cancelled: true });
  tasks.push(task(4, "0a0b0c0d-cancel.png", [cancelled, annotation(104, b)]));
  expected["/data/upload/1/0a0b0c0d-cancel.png"] = { width: 6, height: 4, rows: expect(6, 4, b) };
}
// Not annotated.
tasks.push(task(5, "99999999-todo.png", []));

writeFileSync("labelstudio_export.json", JSON.stringify(tasks));
writeFileSync("labelstudio_expected.json", JSON.stringify({
  classes: ["background", "Cat", "Dog"], unlabelled: ["/data/upload/1/99999999-todo.png"], masks: expected,
}));
