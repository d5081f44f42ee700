"""What the PKB-facing unit tests share: why they skip without PKB, and FakeVm, a Linux VM
that records what the plugin asks of it (PKB package installs, apt updates, commands, files)
and answers the few commands whose output the plugin reads. vm.Install goes through PKB's
package registry (linux_packages.PACKAGES) as PKB's own VMs do. LocalVm runs its commands
for real, here."""

import subprocess

NEEDS_PKB = (
    "PKB is not importable here: these tests run under PKB's Python"
    ' (eval "$(scripts/pkbvenv)" && "$PKB_PYTHON" -m pytest tests/pkb)'
)


UBUNTU_2204 = 'ID=ubuntu\nVERSION_ID="22.04"\n'
RHEL_9 = 'ID="rhel"\nVERSION_ID="9.4"\n'


class FakeVm:
    def __init__(self, name="vm0", os_release=UBUNTU_2204, arch="x86_64", answers=None):
        self.name = name
        self.os_release = os_release
        self.cpu_arch = arch
        self.package_manager = "yum" if "rhel" in os_release else "apt"
        self.answers = dict(answers or {})  # command substring -> (stdout, rc[, stderr])
        self.calls = []
        self.installed = set()
        self.install_packages = True
        self.scratch_disks = []
        self.user_name = "perfkit"

    def Install(self, package_name):
        from perfkitbenchmarker import linux_packages

        self.calls.append(("Install", package_name))
        if not self.install_packages or package_name in self.installed:
            return
        module = linux_packages.PACKAGES[package_name]
        getattr(module, "AptInstall" if self.package_manager == "apt" else "YumInstall")(self)
        self.installed.add(package_name)

    def InstallPackages(self, packages):
        self.calls.append(("InstallPackages", packages))

    def AptUpdate(self):
        self.calls.append(("AptUpdate",))

    def _answer(self, command):
        if command.startswith("cat /etc/os-release"):
            return f"{self.os_release}---\n{self.cpu_arch}\n", 0, ""
        for key, answer in self.answers.items():
            if key in command:
                return (*answer, "")[:3]
        return "", 0, ""

    def RemoteCommand(self, command, **kwargs):
        self.calls.append(("RemoteCommand", command))
        out, rc, err = self._answer(command)
        if rc and not kwargs.get("ignore_failure"):
            raise RuntimeError(f"{command}: exit status {rc}")
        return out, err

    def RemoteCommandWithReturnCode(self, command, **kwargs):
        self.calls.append(("RemoteCommand", command))
        out, rc, err = self._answer(command)
        return out, err, rc

    def PushFile(self, local, remote):
        self.calls.append(("PushFile", remote))

    def commands(self):
        return [c[1] for c in self.calls if c[0] == "RemoteCommand"]


class LocalVm:
    """A VM whose commands really run, here (bash), with `scratch` as its scratch
    directory: for the plugin's process handling against real processes."""

    name = "local"
    scratch_disks = ()

    def __init__(self, scratch=None):
        self.scratch = scratch

    def GetScratchDir(self):
        return self.scratch

    def RemoteCommandWithReturnCode(self, command, **kwargs):
        done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=60)
        return done.stdout, done.stderr, done.returncode

    def RemoteCommand(self, command, ignore_failure=False, **kwargs):
        out, err, rc = self.RemoteCommandWithReturnCode(command)
        if rc and not ignore_failure:
            raise RuntimeError(f"{command}: exit status {rc}: {err}")
        return out, err
