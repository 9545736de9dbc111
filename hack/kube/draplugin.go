package main

// The DRA kubelet plugin of hack/node.sh: Kubernetes' own e2e test driver
// (test/e2e/dra/test-driver/app) publishing the fake nodes' device shape --
// N devices gpu-0..gpu-N-1, each with a memory capacity and a productName
// attribute -- so the project's DeviceClass and CEL selectors work unchanged
// on the real node.
//
// With --slices-file it publishes another driver's shape instead: each
// ResourceSlice document of that file (hack/node/nvidia.yaml) becomes one
// slice of the node's pool, its devices and shared counters as written; the
// file's pool, node and driver fields are ignored (this node's win), and its
// other documents (DeviceClasses) are left to hack/node.sh. --drop strips
// what an older API server would drop on its own (device taints, counters),
// so the published slices equal what the server stores and nothing is
// written twice. Whatever the scheduler allocates from them is prepared like
// the default shape's devices: a CDI file per claim.
//
// The upstream driver remembers prepared claims in memory only: restarted
// while a claim is prepared, its later unprepare finds nothing and the
// claim's CDI file stays behind. An interceptor here removes a claim's CDI
// files whenever the kubelet unprepares it, so a restart leaks nothing.

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/yaml"
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
	slicesFile := fs.String("slices-file", "", "publish the ResourceSlices of this YAML file instead of --devices/--memory/--product")
	drop := fs.String("drop", "", "comma-separated parts of --slices-file not published: taints, counters")
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

	var slices []resourceslice.Slice
	if *slicesFile != "" {
		slices, err = readSlices(*slicesFile, *drop)
		if err != nil {
			fmt.Fprintf(os.Stderr, "draplugin: --slices-file %s: %v\n", *slicesFile, err)
			return 2
		}
	} else {
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
		slices = []resourceslice.Slice{{Devices: published}}
	}
	resources := &resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{
		*nodeName: {Slices: slices},
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
	klog.InfoS("DRA plugin started", "driver", *driver, "node", *nodeName, "slices", len(slices))
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

// readSlices reads the ResourceSlice documents of a YAML file, in order, as
// the slices of one pool.
func readSlices(path, drop string) ([]resourceslice.Slice, error) {
	dropTaints, dropCounters := false, false
	for _, part := range strings.Split(drop, ",") {
		switch strings.TrimSpace(part) {
		case "":
		case "taints":
			dropTaints = true
		case "counters":
			dropCounters = true
		default:
			return nil, fmt.Errorf("--drop %q: only taints and counters can be dropped", part)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	decoder := yaml.NewYAMLOrJSONDecoder(f, 4096)
	var slices []resourceslice.Slice
	for {
		var doc struct {
			Kind string                        `json:"kind"`
			Spec resourceapi.ResourceSliceSpec `json:"spec"`
		}
		if err := decoder.Decode(&doc); err == io.EOF {
			break
		} else if err != nil {
			return nil, err
		}
		if doc.Kind != "ResourceSlice" {
			continue
		}
		slice := resourceslice.Slice{Devices: doc.Spec.Devices, SharedCounters: doc.Spec.SharedCounters}
		for i := range slice.Devices {
			if dropTaints {
				slice.Devices[i].Taints = nil
			}
			if dropCounters {
				slice.Devices[i].ConsumesCounters = nil
			}
		}
		if dropCounters {
			if len(slice.Devices) == 0 {
				continue // a counters-only slice: nothing left of it
			}
			slice.SharedCounters = nil
		}
		slices = append(slices, slice)
	}
	if len(slices) == 0 {
		return nil, fmt.Errorf("no ResourceSlice in it")
	}
	return slices, nil
}

// claimUID reads a claim's UID under either accessor name: the generated
// code spells it GetUID up to Kubernetes 1.35 and GetUid from 1.36, and the
// same source builds against both (hack/kube/versions).
func claimUID(claim any) string {
	switch c := claim.(type) {
	case interface{ GetUid() string }:
		return c.GetUid()
	case interface{ GetUID() string }:
		return c.GetUID()
	}
	return ""
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
				if r := out.GetClaims()[claimUID(claim)]; r != nil && r.GetError() != "" {
					continue
				}
			}
			files, _ := filepath.Glob(filepath.Join(cdiDir, driver+"-"+claimUID(claim)+"-*.json"))
			for _, f := range files {
				if rmErr := os.Remove(f); rmErr != nil && !os.IsNotExist(rmErr) {
					klog.FromContext(ctx).Error(rmErr, "removing CDI file", "path", f)
				}
			}
		}
		return resp, err
	}
}
