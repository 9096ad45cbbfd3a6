"""The suite's oracles: what a correct answer is, computed apart from the code under test (transformers' chat
templates, the spec's own schemas and constraints, the parser-family table), and the request builders and
hypothesis strategies that feed them."""
