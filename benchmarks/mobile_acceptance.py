"""Issue 28's acceptance: `zoo export --mobile` TFLite classifiers in MediaPipe Tasks against zoo's Keras model.

    python -m benchmarks.mnist_png_folder /tmp/gray --names --limit 3000
    zoo train --data /tmp/gray --out runs --epochs 10
    zoo export runs/convnet_bn-gray --data /tmp/gray --formats tflite --precision float32,int8 --mobile --out exp
    python -m benchmarks.mobile_acceptance runs/convnet_bn-gray exp /tmp/gray/test --images 20

Takes `--images` image files from the folder (round-robin over its class folders, sorted), asks zoo
(`zoo.deploy.artifacts.predict`, reading the files as the run's metadata says) for the Keras model's classes,
and MediaPipe Tasks' `ImageClassifier` (`zoo.deploy.formats.mobile_clients`, in its own virtualenv) and zoo's
own TFLite runner for every `*_mobile.tflite` in the export folder, on the same files as they are. Prints, per file, the class
names both return and whether top-1 agrees, then the standard metadata read back by tflite-support's
`MetadataDisplayer` (normalization, colour space, packed labels) where that client is installed.
`--json FILE` writes the figures. Exits 1 unless every file agrees.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def pick_files(folder: Path, n: int) -> list[Path]:
    """`n` image files, round-robin over the class folders (sorted), so every class is seen."""
    classes = sorted(p for p in folder.iterdir() if p.is_dir())
    per_class = [sorted(f for f in c.iterdir() if f.suffix.lower() in (".png", ".jpg", ".jpeg")) for c in classes]
    files, i = [], 0
    while len(files) < n and any(i < len(f) for f in per_class):
        files += [f[i] for f in per_class if i < len(f)][: n - len(files)]
        i += 1
    return files


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="the Keras model zoo exported: a run directory or a .keras file")
    parser.add_argument("export_dir", help="the folder `zoo export --mobile` wrote")
    parser.add_argument("images", help="a folder of class folders of image files (e.g. the data's test split)")
    parser.add_argument("--images", dest="n", type=int, default=20, help="how many files (default 20)")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args(argv)

    import zoo.deploy.artifacts
    from zoo.deploy.formats import mobile_clients

    files = pick_files(Path(args.images), args.n)
    keras = zoo.deploy.artifacts.predict(args.model, [str(f) for f in files], top_k=1)
    keras_names = [keras.labels(int(i)) for i in keras.outputs.argmax(-1)]
    models = sorted(str(p) for p in Path(args.export_dir).glob("*_mobile.tflite"))
    if not models:
        raise SystemExit(f"no *_mobile.tflite in {args.export_dir}: export with --mobile")
    answer = mobile_clients.mediapipe_classify(models, files)
    figures = {"mediapipe": answer["version"], "files": [str(f) for f in files], "keras": keras_names, "models": {}}
    ok = True
    for model in models:
        top = [r[0] for r in answer["results"][model]]
        agree = sum(t["name"] == k for t, k in zip(top, keras_names))
        own = zoo.deploy.artifacts.predict(model, [str(f) for f in files], top_k=1)  # zoo's TFLite runner, same file
        own_names = [own.labels(int(i)) for i in own.outputs.argmax(-1)]
        same = sum(t["name"] == o for t, o in zip(top, own_names))
        ok &= agree == len(files)
        figures["models"][model] = {"top1": [t["name"] for t in top], "scores": [round(t["score"], 4) for t in top],
                                    "agree": agree, "zoo_tflite_top1": own_names, "agree_with_zoo_tflite": same}
        print(f"\n{os.path.basename(model)} in MediaPipe {answer['version']} ImageClassifier: top-1 = Keras on "
              f"{agree}/{len(files)} files, = zoo's own TFLite runner on {same}/{len(files)}")
        print(f"  {'file':40s} {'keras':10s} {'mediapipe':10s} {'score':6s} zoo tflite")
        for f, k, t, o in zip(files, keras_names, top, own_names):
            print(f"  {str(Path(f).relative_to(args.images)):40s} {k:10s} {t['name']:10s} {t['score']:.4f} {o}"
                  f"{'' if t['name'] == k else '  DIFFERS from Keras'}")
    if mobile_clients.absent("tflite_support") is None:
        figures["metadata"] = {}
        for model in models:
            shown = mobile_clients.read_metadata(model)
            meta = shown["metadata"]
            image = meta["subgraph_metadata"][0]["input_tensor_metadata"][0]
            output = meta["subgraph_metadata"][0]["output_tensor_metadata"][0]
            read = {"name": meta.get("name"), "version": meta.get("version"), "license": meta.get("license"),
                    "color_space": image["content"]["content_properties"].get("color_space"),
                    "normalization": image["process_units"][0]["options"], "stats": image.get("stats"),
                    "labels_file": [(a["name"], a["type"]) for a in output.get("associated_files", [])],
                    "labels": shown["files"].get("labels.txt", "").splitlines()}
            figures["metadata"][model] = read
            print(f"\n{os.path.basename(model)}: standard metadata read back by tflite-support's MetadataDisplayer")
            for key, value in read.items():
                print(f"  {key}: {value}")
    else:
        print(f"\n(metadata not read back: {mobile_clients.absent('tflite_support')})")
    if args.json:
        from zoo.fileio import atomic_write_text

        atomic_write_text(Path(args.json), json.dumps(figures, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.exit(main())
