"""Issue 40's acceptance: a TextVectorization classifier's artifacts, given raw held-out strings, against Keras.

    python -m benchmarks.moby_dick_text_folder /tmp/moby_text
    zoo train --data /tmp/moby_text --out runs
    zoo export runs/fasttext_classifier-moby_text --mobile --out exp
    python -m benchmarks.text_acceptance runs/fasttext_classifier-moby_text exp /tmp/moby_text --json out.json

Takes the data folder's test split (as `zoo train` drew it, raw strings), asks the Keras model for its
top-1, then every artifact in the export folder through `zoo.deploy.artifacts.load` (each takes the raw
strings: the SavedModel in its graph, the others through the carried front-end), and MediaPipe Tasks'
`TextClassifier` (`zoo.deploy.formats.mobile_clients`, its own virtualenv) on each `*_mobile.tflite`,
which tokenizes with the file's RegexTokenizer metadata and names the classes from its labels file.
Prints the agreement per runtime; `--json FILE` writes the figures. Exits 1 unless MediaPipe agrees on
at least 99% of the strings.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="the run directory (its best.keras) or a .keras file")
    parser.add_argument("export_dir")
    parser.add_argument("data", help="the text folder the model was trained on")
    parser.add_argument("--json")
    args = parser.parse_args(argv)

    import zoo.data
    from zoo.deploy.artifacts import load
    from zoo.deploy.formats import mobile_clients
    from zoo.deploy.formats.text_front import MOBILE_RULES

    model = Path(args.model)
    keras_model = load(model / "best.keras" if model.is_dir() else model)
    texts = np.asarray([str(t) for t in zoo.data.from_text_folder(args.data).texts["test"]], dtype=object)
    names = keras_model.metadata.class_names
    reference = np.asarray(keras_model.runner.predict(texts)["predictions"]).argmax(-1)
    figures = {"strings": len(texts), "classes": list(names), "runtimes": {}, "mediapipe": {}}
    export = Path(args.export_dir)
    candidates = sorted([*export.glob("*.tflite"), *export.glob("*.onnx"), *export.glob("tfjs_*"),
                         *export.glob("*_openvino_*"), *export.glob("saved_model")])
    for path in candidates:
        artifact = load(path)
        top = np.asarray(artifact.runner.predict(texts)["predictions"]).argmax(-1)
        figures["runtimes"][path.name] = {"runtime": artifact.runtime, "top1_agree": int((top == reference).sum())}
        print(f"{path.name:50s} {artifact.runtime:45s} top-1 {int((top == reference).sum())}/{len(texts)}")
    ok = True
    for path in sorted(export.glob("*_mobile.tflite")):
        answer = mobile_clients.mediapipe_classify_text([path], list(texts))
        top = [r[0]["name"] for r in answer["results"][str(path)]]
        agree = int(sum(t == names[k] for t, k in zip(top, reference)))
        figures["mediapipe"][path.name] = {"version": answer["version"], "top1_agree": agree,
                                           "names": sorted(set(top)), "rules": MOBILE_RULES}
        print(f"{path.name:50s} MediaPipe {answer['version']} TextClassifier  top-1 {agree}/{len(texts)}, "
              f"names {sorted(set(top))}")
        ok &= agree >= 0.99 * len(texts)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
