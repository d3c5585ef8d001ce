package kubeconfig

import (
	"fmt"
	"os"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// paths returns the kubeconfig files to load and the attribute they came from.
func (c Config) paths() ([]string, string) {
	if c.ConfigPath != "" {
		return []string{c.ConfigPath}, "config_path"
	}
	var out []string
	for _, p := range c.ConfigPaths {
		if strings.TrimSpace(p) != "" {
			out = append(out, p)
		}
	}
	return out, "config_paths"
}

// loadKubeconfig reads and merges the kubeconfig files, checking each one on
// its own first: client-go silently skips missing files in a list, and the
// user deserves to hear which of their files is the broken one.
func (c Config) loadKubeconfig(paths []string, attr string) (*clientcmd.ClientConfigLoadingRules, *clientcmdapi.Config, string, []Problem) {
	var problems []Problem
	expanded := make([]string, 0, len(paths))
	for _, p := range paths {
		e, err := expandHome(p)
		if err != nil {
			problems = append(problems, Problem{
				Attribute: attr,
				Summary:   "Cannot Expand Kubeconfig Path",
				Detail: fmt.Sprintf("The kubeconfig path %q in %s starts with \"~/\", but the home directory is unknown: %v. "+
					"Use an absolute path instead.", p, attr, err),
			})
			continue
		}
		expanded = append(expanded, e)
		if p := checkKubeconfigFile(e, attr); p != nil {
			problems = append(problems, *p)
		}
	}
	if len(problems) > 0 {
		return nil, nil, "", problems
	}

	rules := &clientcmd.ClientConfigLoadingRules{Precedence: expanded}
	raw, err := rules.Load()
	if err != nil {
		return nil, nil, "", []Problem{{
			Attribute: attr,
			Summary:   "Invalid Kubeconfig File",
			Detail: fmt.Sprintf("The kubeconfig %s from %s could not be merged: %v. Fix the files or list fewer of them.",
				quoteList(expanded), attr, err),
		}}
	}

	files := quoteList(expanded)
	contextName := c.ConfigContext
	switch {
	case contextName != "":
		if _, ok := raw.Contexts[contextName]; !ok {
			problems = append(problems, Problem{
				Attribute: "config_context",
				Summary:   "Unknown Kubeconfig Context",
				Detail: fmt.Sprintf("config_context is %q, but the kubeconfig %s has no context with that name. %s",
					contextName, files, available("context", "config_context", raw.Contexts)),
			})
		}
	case raw.CurrentContext != "":
		contextName = raw.CurrentContext
		if _, ok := raw.Contexts[contextName]; !ok {
			problems = append(problems, Problem{
				Attribute: attr,
				Summary:   "Kubeconfig Current Context Not Found",
				Detail: fmt.Sprintf("The kubeconfig %s selects current-context %q, but defines no context with that name. %s",
					files, contextName, available("context", "config_context", raw.Contexts)),
			})
		}
	case c.Host == "" && c.ConfigContextCluster == "":
		// Without a context nothing says which cluster to talk to, and
		// client-go's own message for this points at an unrelated variable.
		problems = append(problems, Problem{
			Attribute: attr,
			Summary:   "Kubeconfig Has No Current Context",
			Detail: fmt.Sprintf("The kubeconfig %s sets no current-context, so it does not say which cluster to use. %s",
				files, available("context", "config_context", raw.Contexts)),
		})
	}
	if name := c.ConfigContextAuthInfo; name != "" {
		if _, ok := raw.AuthInfos[name]; !ok {
			problems = append(problems, Problem{
				Attribute: "config_context_auth_info",
				Summary:   "Unknown Kubeconfig User",
				Detail: fmt.Sprintf("config_context_auth_info is %q, but the kubeconfig %s has no user with that name. %s",
					name, files, available("user", "config_context_auth_info", raw.AuthInfos)),
			})
		}
	}
	if name := c.ConfigContextCluster; name != "" {
		if _, ok := raw.Clusters[name]; !ok {
			problems = append(problems, Problem{
				Attribute: "config_context_cluster",
				Summary:   "Unknown Kubeconfig Cluster",
				Detail: fmt.Sprintf("config_context_cluster is %q, but the kubeconfig %s has no cluster with that name. %s",
					name, files, available("cluster", "config_context_cluster", raw.Clusters)),
			})
		}
	}
	if len(problems) > 0 {
		return nil, nil, "", problems
	}
	return rules, raw, contextName, nil
}

// checkKubeconfigFile returns a problem when path is not a readable,
// parseable kubeconfig.
func checkKubeconfigFile(path, attr string) *Problem {
	info, err := os.Stat(path)
	if err != nil {
		if os.IsNotExist(err) {
			return &Problem{
				Attribute: attr,
				Summary:   "Kubeconfig File Not Found",
				Detail: fmt.Sprintf("The kubeconfig file %q named in %s does not exist (%v). "+
					"Check the path, or remove %s to configure the cluster with host and credentials instead.",
					path, attr, err, attr),
			}
		}
		return &Problem{
			Attribute: attr,
			Summary:   "Unreadable Kubeconfig File",
			Detail:    fmt.Sprintf("The kubeconfig file %q named in %s cannot be accessed: %v. Check its permissions.", path, attr, err),
		}
	}
	if info.IsDir() {
		return &Problem{
			Attribute: attr,
			Summary:   "Kubeconfig Path Is a Directory",
			Detail:    fmt.Sprintf("The kubeconfig path %q named in %s is a directory. Point %s at the kubeconfig file itself.", path, attr, attr),
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return &Problem{
			Attribute: attr,
			Summary:   "Unreadable Kubeconfig File",
			Detail:    fmt.Sprintf("The kubeconfig file %q named in %s cannot be read: %v. Check its permissions.", path, attr, err),
		}
	}
	if _, err := clientcmd.Load(data); err != nil {
		return &Problem{
			Attribute: attr,
			Summary:   "Invalid Kubeconfig File",
			Detail: fmt.Sprintf("The kubeconfig file %q named in %s is not a valid kubeconfig: %v. "+
				"Check that it is the YAML written by kubectl or your cluster tooling.", path, attr, err),
		}
	}
	return nil
}
