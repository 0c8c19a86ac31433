"""What an ES run is made of and how ``es-train`` drives it: the set-up of a run's parts
(:mod:`~evokit_py.training.setup`), its checkpoint and policy files (:mod:`~evokit_py.training.saving`),
the schedule that turns worker time into updates, the evaluations of the solution and the progress log.
"""
