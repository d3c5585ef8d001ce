package provider_test

import (
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func metaName(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name} }

func metaNamespaced(ns, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name}
}

// cliList is both CLIs, or the one named by NM_TEST_CLI (for a quick run).
func cliList() []string {
	if cli := os.Getenv("NM_TEST_CLI"); cli != "" {
		return []string{cli}
	}
	return []string{"tofu", "terraform"}
}
