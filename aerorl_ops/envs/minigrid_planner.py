"""Shortest paths to the goal in a MiniGrid grid: a breadth-first search over (position, direction).

The planner moves as MiniGrid's first three actions do: ``left`` (0) and ``right`` (1) turn the agent,
``forward`` (2) steps into the cell ahead when that cell is empty or can be walked over (an open door,
the goal; never lava, which ends the episode with no reward). The path ends on the goal. A grid with
no goal, or none reachable so, has no path (None). It reads the environment's ``unwrapped`` grid,
agent position and direction, and takes no step.

>>> import gymnasium as gym, minigrid
>>> env = gym.make("MiniGrid-Empty-5x5-v0"); _ = env.reset(seed=0)
>>> shortest_path(env.unwrapped)  # from (1, 1) facing right to the goal at (3, 3)
(2, 2, 1, 2, 2)
"""

from __future__ import annotations

from collections import deque

LEFT, RIGHT, FORWARD = 0, 1, 2
"""MiniGrid's action numbers for turning and moving."""
DIRECTIONS = ((1, 0), (0, 1), (-1, 0), (0, -1))
"""MiniGrid's ``DIR_TO_VEC``: direction 0 faces right (+x), 1 down (+y), 2 left, 3 up."""


def is_minigrid(unwrapped: object) -> bool:
    """Whether ``unwrapped`` (an environment's ``unwrapped``) has a MiniGrid grid and agent to plan over."""
    return all(hasattr(unwrapped, name) for name in ("grid", "agent_pos", "agent_dir"))


def _walkable(cell: object) -> bool:
    return cell is None or (cell.can_overlap() and cell.type != "lava")


def shortest_path(unwrapped: object) -> tuple[int, ...] | None:
    """The fewest actions (``LEFT``, ``RIGHT``, ``FORWARD``) that take the agent onto the goal; None when none
    do. Among paths of one length, the search prefers forward, then left, then right."""
    grid = unwrapped.grid
    start = (int(unwrapped.agent_pos[0]), int(unwrapped.agent_pos[1]), int(unwrapped.agent_dir))
    came_from: dict[tuple[int, int, int], tuple[tuple[int, int, int], int] | None] = {start: None}
    queue = deque([start])
    while queue:
        x, y, direction = state = queue.popleft()
        dx, dy = DIRECTIONS[direction]
        ahead = (x + dx, y + dy)
        if 0 <= ahead[0] < grid.width and 0 <= ahead[1] < grid.height:
            cell = grid.get(*ahead)
            if cell is not None and cell.type == "goal":
                return _actions(came_from, state) + (FORWARD,)
        moves = [((x, y, (direction - 1) % 4), LEFT), ((x, y, (direction + 1) % 4), RIGHT)]
        if 0 <= ahead[0] < grid.width and 0 <= ahead[1] < grid.height and _walkable(grid.get(*ahead)):
            moves.insert(0, ((*ahead, direction), FORWARD))
        for following, action in moves:
            if following not in came_from:
                came_from[following] = (state, action)
                queue.append(following)
    return None


def _actions(came_from: dict, state: tuple[int, int, int]) -> tuple[int, ...]:
    actions = []
    while came_from[state] is not None:
        state, action = came_from[state]
        actions.append(action)
    return tuple(reversed(actions))
