// Command karpenter is Karpenter's core built with its KWOK cloud provider and GPU
// instance types of our own, so hack/cluster.sh can run a node autoscaler that
// understands DRA on the local control plane.
//
// The instance types come from the file named by --instance-types-file-path
// (hack/karpenter/instance_types.json): Karpenter's KWOK format. A type named
// gpu-<N>x<M>gi also gets a ResourceSlice template of N devices with M GiB of
// memory each, in the driver named by OPENRL_KARPENTER_DRIVER (default
// gpu.example.com), so Karpenter can tell which type a pod's ResourceClaim needs
// before any such node exists. hack/fakenodes publishes the real slices once a
// node comes up. Run with --ignore-dra-requests=false.
package main

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"unique"

	"github.com/samber/lo"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcev1 "k8s.io/api/resource/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kwok "sigs.k8s.io/karpenter/kwok/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/overlay"
	"sigs.k8s.io/karpenter/pkg/controllers"
	"sigs.k8s.io/karpenter/pkg/controllers/node/health"
	"sigs.k8s.io/karpenter/pkg/controllers/state"
	"sigs.k8s.io/karpenter/pkg/operator"
)

var gpuType = regexp.MustCompile(`^gpu-(\d+)x(\d+)gi$`)

// withDevices gives every gpu-<N>x<M>gi type its devices' ResourceSlice template.
func withDevices(types []*cloudprovider.InstanceType, driver string) {
	for _, it := range types {
		m := gpuType.FindStringSubmatch(it.Name)
		if m == nil {
			continue
		}
		count, _ := strconv.Atoi(m[1])
		gib, _ := strconv.Atoi(m[2])
		devices := make([]cloudprovider.Device, 0, count)
		for i := range count {
			devices = append(devices, cloudprovider.Device{
				Name: unique.Make(fmt.Sprintf("gpu-%d", i)),
				Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
					"productName": {StringValue: lo.ToPtr("Example GPU")},
				},
				Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{
					"memory": {Value: resource.MustParse(fmt.Sprintf("%dGi", gib))},
				},
			})
		}
		it.DynamicResources = cloudprovider.DynamicResources{
			ResourceSliceTemplates: []*cloudprovider.ResourceSliceTemplate{{
				Driver:  unique.Make(driver),
				Pool:    cloudprovider.ResourcePool{Name: unique.Make("gpus")},
				Devices: devices,
			}},
		}
	}
}

func main() {
	ctx, op := operator.NewOperator()
	instanceTypes, err := kwok.ConstructInstanceTypes(ctx)
	if err != nil {
		log.FromContext(ctx).Error(err, "failed constructing instance types")
		os.Exit(1)
	}
	withDevices(instanceTypes, lo.CoalesceOrEmpty(os.Getenv("OPENRL_KARPENTER_DRIVER"), "gpu.example.com"))
	provider := kwok.NewCloudProvider(ctx, op.GetClient(), instanceTypes)
	cloudProvider := overlay.Decorate(provider, op.GetClient(), op.InstanceTypeStore)
	repair := lo.Must(health.NewRepairPolicyMatcher(ctx, cloudProvider))
	cluster := state.NewCluster(op.Clock, op.GetClient(), cloudProvider, state.WithRepairPolicyMatcher(repair))
	op.WithControllers(ctx, controllers.NewControllers(
		ctx, op.Manager, op.Clock, op.GetClient(), op.EventRecorder, cloudProvider, provider,
		cluster, op.InstanceTypeStore, op.PredictionStore,
	)...).Start(ctx)
}
