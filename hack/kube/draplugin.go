package main

// The DRA kubelet plugin of hack/node.sh: Kubernetes' own e2e test driver
// (test/e2e/dra/test-driver/app) publishing the fake nodes' device shape --
// N devices gpu-0..gpu-N-1, each with a memory capacity and a productName
// attribute -- so the project's DeviceClass and CEL selectors work unchanged
// on the real node.
//
// The upstream driver remembers prepared claims in memory only: restarted
// while a claim is prepared, its later unprepare finds nothing and the
// claim's CDI file stays behind. An interceptor here removes a claim's CDI
// files whenever the kubelet unprepares it, so a restart leaks nothing.

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"google.golang.org/grpc"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	"k8s.io/kubernetes/test/e2e/dra/test-driver/app"
	"k8s.io/utils/ptr"
)

func runDRAPlugin(args []string) int {
	fs := flag.NewFlagSet("draplugin", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the node's identity")
	nodeName := fs.String("node-name", "", "the node's name (also the pool name)")
	driver := fs.String("driver", "gpu.example.com", "DRA driver name")
	devices := fs.Int("devices", 8, "number of devices to publish")
	memory := fs.String("memory", "80Gi", "each device's memory capacity")
	product := fs.String("product", "Example GPU 80GB", "each device's productName attribute")
	kubeletDir := fs.String("kubelet-dir", "/var/lib/kubelet", "the kubelet's root directory")
	cdiDir := fs.String("cdi-dir", "/var/run/cdi", "where CDI specs are written (the runtime's cdi_spec_dirs)")
	readyFile := fs.String("ready-file", "", "written once the kubelet has registered the plugin")
	klog.InitFlags(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if *nodeName == "" || *kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "draplugin: --node-name and --kubeconfig are required")
		return 2
	}
	capacity, err := resource.ParseQuantity(*memory)
	if err != nil {
		fmt.Fprintf(os.Stderr, "draplugin: --memory %q: %v\n", *memory, err)
		return 2
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "draplugin: %v\n", err)
		return 1
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "draplugin: %v\n", err)
		return 1
	}

	var published []resourceapi.Device
	for i := 0; i < *devices; i++ {
		published = append(published, resourceapi.Device{
			Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"productName": {StringValue: ptr.To(*product)},
			},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
				"memory": {Value: capacity},
			},
		})
	}
	resources := &resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{
		*nodeName: {Slices: []resourceslice.Slice{{Devices: published}}},
	}}

	pluginDir := filepath.Join(*kubeletDir, "plugins", *driver)
	for _, dir := range []string{pluginDir, filepath.Join(*kubeletDir, "plugins_registry"), *cdiDir} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			fmt.Fprintf(os.Stderr, "draplugin: %v\n", err)
			return 1
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx = klog.NewContext(ctx, klog.Background())
	plugin, err := app.StartPlugin(ctx, *cdiDir, *driver, client, *nodeName,
		app.FileOperations{DriverResources: resources},
		kubeletplugin.PluginDataDirectoryPath(pluginDir),
		kubeletplugin.RegistrarDirectoryPath(filepath.Join(*kubeletDir, "plugins_registry")),
		kubeletplugin.GRPCInterceptor(removeCDIOnUnprepare(*cdiDir, *driver)),
	)
	if err != nil {
		fmt.Fprintf(os.Stderr, "draplugin: %v\n", err)
		return 1
	}
	klog.InfoS("DRA plugin started", "driver", *driver, "node", *nodeName, "devices", *devices)
	if *readyFile != "" {
		go func() {
			for ctx.Err() == nil && !plugin.IsRegistered() {
				time.Sleep(100 * time.Millisecond)
			}
			if ctx.Err() == nil {
				klog.InfoS("registered with the kubelet")
				_ = os.WriteFile(*readyFile, []byte("registered\n"), 0o644)
			}
		}()
	}
	<-ctx.Done()
	plugin.Stop()
	return 0
}

// removeCDIOnUnprepare deletes <cdiDir>/<driver>-<claim uid>-*.json for every
// claim the kubelet unprepared successfully, whether or not this process
// prepared it (see the file comment).
func removeCDIOnUnprepare(cdiDir, driver string) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		in, ok := req.(*drapb.NodeUnprepareResourcesRequest)
		if !ok || err != nil {
			return resp, err
		}
		out, _ := resp.(*drapb.NodeUnprepareResourcesResponse)
		for _, claim := range in.GetClaims() {
			if out != nil {
				if r := out.GetClaims()[claim.GetUid()]; r != nil && r.GetError() != "" {
					continue
				}
			}
			files, _ := filepath.Glob(filepath.Join(cdiDir, driver+"-"+claim.GetUid()+"-*.json"))
			for _, f := range files {
				if rmErr := os.Remove(f); rmErr != nil && !os.IsNotExist(rmErr) {
					klog.FromContext(ctx).Error(rmErr, "removing CDI file", "path", f)
				}
			}
		}
		return resp, err
	}
}
