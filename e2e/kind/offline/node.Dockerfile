# The offline kind node image (built by e2e/kind/offline/build.sh, which lays
# out the context): kind's base layout (entrypoint, systemd units, kubelet
# drop-ins from the pinned kind module) on Debian with Debian's systemd,
# containerd, runc and CNI plugins, the pinned kubelet/kubeadm/kubectl, and the
# control plane's component images imported into containerd at boot.
ARG DEBIAN_RELEASE=bookworm
FROM debian:${DEBIAN_RELEASE}
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      systemd systemd-sysv dbus containerd runc containernetworking-plugins \
      conntrack iptables nftables iproute2 ethtool util-linux mount kmod socat \
      libseccomp2 pigz bash ca-certificates jq procps \
 && rm -rf /var/lib/apt/lists/* \
 && find /lib/systemd/system/sysinit.target.wants/ -name "systemd-tmpfiles-setup.service" -delete \
 && rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* \
      /lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* \
      /lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/* \
 && echo "ReadKMsg=no" >> /etc/systemd/journald.conf \
 && ln -sf /usr/bin/containerd /usr/local/bin/containerd
COPY kind-base/usr/local/bin/ /usr/local/bin/
COPY kind-base/kind/ /kind/
COPY kind-base/etc/ /etc/
COPY node/ /
COPY bin/ /usr/bin/
COPY images/ /kind/images/
RUN chmod 755 /kind /kind/bin /kind/bin/* /usr/local/bin/* /usr/bin/kubelet /usr/bin/kubeadm /usr/bin/kubectl \
 && systemctl enable kubelet.service containerd.service undo-mount-hacks.service tally-import-images.service \
 && systemctl mask systemd-binfmt.service \
 && mkdir -p /etc/kubernetes/manifests \
 && kubelet --version && kubeadm version -o short
ENV container=docker
STOPSIGNAL SIGRTMIN+3
ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]
