"""`zoo recipes`: the shipped training recipes."""

from __future__ import annotations


def add(sub):
    p = sub.add_parser("recipes", help="list the training recipes")
    p.set_defaults(func=_cmd_recipes)


def _cmd_recipes(args) -> int:
    from zoo.training.config import list_recipes, load_recipe

    for name in list_recipes():
        config = load_recipe(name)
        target = f"target {config.target:g}" if config.target is not None else ""
        print(f"{name:<24}{config.model:<24}{config.dataset:<16}{config.epochs:>3} epochs  {target}  {config.description}")
    return 0
