"""``rl_run``: placeholder until the training issue lands. It trains nothing and says so."""


import dagster as dg


@dg.asset(group_name="training", kinds={"pytorch"})
def rl_run(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    """Masked-loss RL against a frozen quantized reference — not implemented yet."""
    raise NotImplementedError("rl_run does not train yet: RL training is tracked as its own issue")
