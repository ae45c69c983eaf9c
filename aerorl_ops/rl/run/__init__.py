"""A whole training run: its inputs, id, lock, phases, resume, and the program the asset and each rank run.
"""
