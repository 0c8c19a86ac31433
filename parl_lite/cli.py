"""The ``parl-lite`` command line: one click group; each feature adds its commands here."""
import click

from parl_lite.version import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="parl-lite")
def main() -> None:
    """parl_lite: PARL-style reinforcement learning, parallel actors and evolution strategies."""


if __name__ == "__main__":
    main()
