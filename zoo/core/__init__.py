"""The bottom layer of zoo: declarations every other package builds on (options, the model base).

Nothing here imports from the rest of zoo except `zoo.errors` and `zoo.fileio`, and nothing here
imports TensorFlow at import time.
"""
