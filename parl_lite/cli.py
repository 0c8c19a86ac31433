"""The ``parl-lite`` command line: one click group; each feature adds its commands here."""
import click

from parl_lite.version import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="parl-lite")
def main() -> None:
    """parl_lite: PARL-style reinforcement learning, parallel actors and evolution strategies."""


@main.command("es-train")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
              help="ES config (YAML). Without it: the built-in job, a linear policy on CartPole-v1.")
@click.option("--resume", is_flag=True, help="Continue from train.checkpoint_dir/solver.h5 if it exists.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a config value, e.g. --set train.workers=1 --set solver.optimizer.base_lr=0.05.")
@click.option("--in-process", is_flag=True, help="Evaluate in this process instead of the worker pool (debugging).")
def es_train(config_path, resume, overrides, in_process) -> None:
    """Train a policy with evolution strategies (evokit_py): candidates are evaluated in parallel on
    the local pool, progress is printed per generation, a checkpoint is written every
    train.checkpoint_every generations and on Ctrl-C, and the best policy is exported to ONNX."""
    from evokit_py.config import ConfigError, resolve_config
    from evokit_py.train import train

    try:
        config = resolve_config(config_path, overrides)
        result = train(config, resume=resume, backend="inprocess" if in_process else "remote", echo=click.echo)
    except (ConfigError, ValueError) as error:
        raise click.ClickException(str(error)) from error
    if result.interrupted:
        raise SystemExit(130)


if __name__ == "__main__":
    main()
