"""A benchmark's target connection string: its flag pair, defined here once for every
benchmark that takes one, and read and checked before anything is provisioned.

    _TARGET = target.DefineUriFlags(BENCHMARK_NAME)  # --<benchmark>_uri_file, _uri_env
    uri = _TARGET.Read()

scripts/gendocs lists the pair under each benchmark that calls DefineUriFlags.
"""

import dataclasses

from absl import flags
from perfkitbenchmarker import errors

from mongobench.core import redact

URI_FILE_HELP = (
    "File (on the PKB host) holding the target connection string, mongodb:// or mongodb+srv://."
)
URI_ENV_HELP = "Environment variable (on the PKB host) holding the target connection string."


@dataclasses.dataclass(frozen=True)
class UriFlags:
    benchmark: str
    file: flags.FlagHolder
    env: flags.FlagHolder

    def Given(self, flag_values=None):
        """Whether either flag is set; `flag_values` (a benchmark config's `flags:`) count."""
        values = dict(flag_values or {})
        return bool(
            values.get(self.file.name, self.file.value) or values.get(self.env.name, self.env.value)
        )

    def Read(self):
        """The target connection string, checked (see ReadTargetUri)."""
        return ReadTargetUri(self.benchmark, self.file.value, self.env.value)


def DefineUriFlags(benchmark, file_note=""):
    """Defines --<benchmark>_uri_file and --<benchmark>_uri_env; `file_note` ends the first's
    help (e.g. which database holds the collection). absl files them under the benchmark's
    module, so `./pkb.py --helpmatch=<benchmark>` lists them with its other flags."""
    return UriFlags(
        benchmark,
        flags.DEFINE_string(
            f"{benchmark}_uri_file",
            None,
            URI_FILE_HELP + file_note,
            module_name=f"perfkitbenchmarker.linux_benchmarks.{benchmark}_benchmark",
        ),
        flags.DEFINE_string(
            f"{benchmark}_uri_env",
            None,
            URI_ENV_HELP,
            module_name=f"perfkitbenchmarker.linux_benchmarks.{benchmark}_benchmark",
        ),
    )


def ReadTargetUri(benchmark, uri_file, uri_env):
    """The target connection string from exactly one of --<benchmark>_uri_file/_uri_env."""
    if bool(uri_file) == bool(uri_env):
        raise errors.Config.InvalidValue(
            f"Give the target deployment with exactly one of --{benchmark}_uri_file or"
            f" --{benchmark}_uri_env."
        )
    source = (
        f"--{benchmark}_uri_file {uri_file}" if uri_file else f"--{benchmark}_uri_env {uri_env}"
    )
    try:
        # Scheme, hosts, escaping and options are checked here, before anything is
        # provisioned; the message never holds the password.
        return redact.check_uri(redact.read_uri(uri_file=uri_file, env=uri_env), source)
    except UnicodeDecodeError:
        raise errors.Config.InvalidValue(f"{source}: not a text file") from None
    except (OSError, ValueError) as e:
        raise errors.Config.InvalidValue(f"{benchmark} target ({source}): {e}") from None
