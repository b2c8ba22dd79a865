"""`zoo recipes`: the shipped training recipes, and (`--knobs`) every key a recipe or `zoo train` can set."""

from __future__ import annotations


def add(sub):
    p = sub.add_parser("recipes", help="list the training recipes (--knobs: every recipe key and train flag)")
    p.add_argument("--knobs", action="store_true",
                   help="print the table of every training knob (recipe key, zoo train flag, meaning) as Markdown")
    p.set_defaults(func=_cmd_recipes)


def _cmd_recipes(args) -> int:
    from zoo.training.config import TrainConfig, list_recipes, load_recipe

    if args.knobs:
        from zoo.training.knobs import docs_page

        print(docs_page(TrainConfig), end="")
        return 0
    for name in list_recipes():
        config = load_recipe(name)
        target = f"target {config.target:g}" if config.target is not None else ""
        print(f"{name:<24}{config.model:<24}{config.dataset:<16}{config.epochs:>3} epochs  {target}  {config.description}")
    return 0
