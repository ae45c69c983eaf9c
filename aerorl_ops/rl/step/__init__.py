"""One RL step's machinery: rollouts, sequences and their log-probs, scoring, updates, token budgets, dynamic
sampling, multi-turn.
"""
