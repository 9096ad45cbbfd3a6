"""The subcommands of ``tokenspec``, one module each; every module has ``register(sub)`` (its parser and
handler) and imports what it runs lazily, so ``tokenspec --help`` stays fast and a broken optional part
cannot stop the others."""

from tokenspec.commands import (
    bench,
    compare,
    embedded,
    expectations,
    golden,
    init,
    matrix,
    model,
    mutants,
    parity,
    run,
    serve,
    spec,
    vllm,
)

#: In the order ``tokenspec --help`` lists them.
COMMANDS = (init, run, model, golden, expectations, spec, serve,
            vllm, parity, bench, mutants, matrix, compare, embedded)
