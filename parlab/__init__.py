"""parlab: a hands-on course on distributed LLM training.

``parlab.costmodel`` answers "how much memory, how long" analytically; ``parlab.comm`` runs real
collectives on local processes; ``parlab.widgets`` and ``parlab.viz`` are the faces the course
notebooks use. Submodules are imported on demand so that ``import parlab`` stays cheap.
"""

__version__ = "0.1.0"
