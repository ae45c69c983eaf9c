"""The models a step runs: policy, reference, value head, LoRA, vision tower, data parallelism and sharding,
checkpoint files.
"""
