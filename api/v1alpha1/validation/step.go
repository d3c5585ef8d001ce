package validation

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
)

// podSpecPath is where the step's pod spec sits in a rollout.
const podSpecPath = "spec.step.jobTemplate.spec.template.spec"

// stepProblems checks spec.step: what the Job needs to be created and to
// run on each node. The API server checks the rest of the Job when the
// operator creates it.
func stepProblems(step *v1alpha1.RolloutStep) Problems {
	if step == nil {
		return nil
	}
	var p Problems
	switch {
	case step.Namespace == "":
		p = append(p, "spec.step.namespace is required: name the namespace the step's Jobs run in (the rollout's creator must be allowed to create Jobs there)")
	default:
		if errs := validation.IsDNS1123Label(step.Namespace); len(errs) > 0 {
			p = append(p, fmt.Sprintf("spec.step.namespace %q is not a valid namespace name: %s", step.Namespace, strings.Join(errs, "; ")))
		}
	}
	if step.Timeout != nil && step.Timeout.Duration <= 0 {
		p = append(p, fmt.Sprintf("spec.step.timeout %s must be positive (e.g. 30m); leave it out to let the step take as long as it takes", step.Timeout.Duration))
	}
	return append(p, podSpecProblems(&step.JobTemplate.Spec.Template.Spec)...)
}

func podSpecProblems(spec *corev1.PodSpec) Problems {
	var p Problems
	if len(spec.Containers) == 0 {
		p = append(p, podSpecPath+".containers is empty: give the step's Job at least one container, with the image and command to run on each node")
	}
	p = append(p, containerProblems("initContainers", spec.InitContainers)...)
	p = append(p, containerProblems("containers", spec.Containers)...)
	switch spec.RestartPolicy {
	case corev1.RestartPolicyNever, corev1.RestartPolicyOnFailure:
	case "":
		p = append(p, podSpecPath+".restartPolicy is not set: a Job's pod needs Never (a failed step fails the node) or OnFailure (its containers retry on the node)")
	default:
		p = append(p, fmt.Sprintf("%s.restartPolicy %q is not allowed for a Job: use Never or OnFailure", podSpecPath, spec.RestartPolicy))
	}
	return p
}

func containerProblems(list string, containers []corev1.Container) Problems {
	var p Problems
	for i, c := range containers {
		at := fmt.Sprintf("%s.%s[%d]", podSpecPath, list, i)
		if c.Name == "" {
			p = append(p, at+" has no name: name each container")
		} else {
			at += fmt.Sprintf(" (%q)", c.Name)
		}
		if strings.TrimSpace(c.Image) == "" {
			p = append(p, at+" has no image: name the image it runs")
		}
	}
	return p
}
