// Command kube is a multi-call binary holding the Kubernetes control-plane
// components that hack/cluster.sh runs as local processes: one build, one
// shared set of compiled packages. The components are Kubernetes' and etcd's
// own commands; this file only chooses which one to run.
//
//	kube apiserver|scheduler|controller-manager|kubectl|etcd|kubelet|draplugin [flags...]
//
// kubelet and draplugin (draplugin.go) are hack/node.sh's real node.
//
// A symlink named after a component (e.g. kubectl -> kube) runs it too.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	_ "time/tzdata"

	etcdmain "go.etcd.io/etcd/server/v3/etcdmain"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

var components = map[string]func(args []string) int{
	"apiserver":          func([]string) int { return cli.Run(apiserver.NewAPIServerCommand()) },
	"scheduler":          func([]string) int { return cli.Run(scheduler.NewSchedulerCommand()) },
	"controller-manager": func([]string) int { return cli.Run(controllermanager.NewControllerManagerCommand()) },
	"kubectl":            runKubectl,
	"kubelet": func([]string) int {
		return cli.Run(kubelet.NewKubeletCommand(context.Background()))
	},
	"draplugin": runDRAPlugin,
	"etcd": func(args []string) int {
		etcdmain.Main(args)
		return 0
	},
}

var aliases = map[string]string{
	"kube-apiserver":          "apiserver",
	"kube-scheduler":          "scheduler",
	"kube-controller-manager": "controller-manager",
}

func runKubectl([]string) int {
	command := kubectlcmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		kubectlutil.CheckErr(err)
	}
	return 0
}

func canonical(name string) string {
	if a, ok := aliases[name]; ok {
		return a
	}
	return name
}

func usage() {
	names := make([]string, 0, len(components))
	for n := range components {
		names = append(names, n)
	}
	fmt.Fprintf(os.Stderr, "usage: kube {%s} [flags...]\n", strings.Join(names, "|"))
}

func main() {
	self := canonical(filepath.Base(os.Args[0]))
	var name string
	var rest []string
	if _, ok := components[self]; ok {
		name, rest = self, os.Args[1:]
	} else if len(os.Args) > 1 {
		name, rest = canonical(os.Args[1]), os.Args[2:]
	}
	run, ok := components[name]
	if !ok {
		usage()
		os.Exit(2)
	}
	// Every component parses os.Args[1:] itself (cobra, or etcd's flag set
	// given the full argv), so present it with the argv it would have had as
	// a standalone binary.
	os.Args = append([]string{name}, rest...)
	os.Exit(run(os.Args))
}
