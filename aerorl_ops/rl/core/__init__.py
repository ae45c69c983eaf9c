"""The RL maths: advantages, KL, aggregation, the policy and value losses, the algorithms' estimators. Tensors in,
tensors out: no model, no I/O.
"""
