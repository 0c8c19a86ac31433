"""The ``parl-lite`` command line: one click group; each feature adds its commands here."""
import click

from parl_lite.io.onnx_cli import export_command
from parl_lite.version import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="parl-lite")
def main() -> None:
    """parl_lite: PARL-style reinforcement learning, parallel actors and evolution strategies."""


main.add_command(export_command)

if __name__ == "__main__":
    main()
