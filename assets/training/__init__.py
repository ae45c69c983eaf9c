"""Training: masked-loss RL of a policy against a frozen quantized reference (``rl_run``)."""
