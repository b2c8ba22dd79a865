"""`zoo presets`: the pretrained weights in the local preset store, with what they reach."""

from __future__ import annotations


def add(sub):
    p = sub.add_parser("presets", help="list the local presets ($ZOO_HOME/presets) with their metrics; "
                                       "load one with zoo.build(NAME, weights=PRESET) or zoo train --weights PRESET")
    p.add_argument("--store", default=None, help="preset folder to list (default $ZOO_HOME/presets, ~/.cache/zoo)")
    p.set_defaults(func=_cmd_presets)


def _metrics(metadata: dict) -> str:
    return ", ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}"
                     for k, v in (metadata.get("metrics") or {}).items()) or "-"


def _cmd_presets(args) -> int:
    from zoo.core import presets

    store = args.store or presets.preset_store()
    rows = [("name", "architecture", "classes", "data", "metrics", "license")]
    for name, preset in presets.list_presets(store):
        if isinstance(preset, presets.PresetError):
            rows.append((name, "UNUSABLE", "", "", str(preset), ""))
            continue
        data = preset.metadata.get("data") or {}
        rows.append((name, preset.architecture, str(preset.num_classes), str(data.get("dataset", "-")),
                     _metrics(preset.metadata), str(preset.metadata.get("license", "-"))))
    if len(rows) == 1:
        print(f"no presets in {store} (zoo train --save-preset NAME writes one)")
        return 0
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]) - 1)]
    for r in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(r, widths)) + "  " + r[-1])
    return 0
