"""Masked-loss RL of a VLM policy against a frozen quantized reference."""
