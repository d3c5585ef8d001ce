package provider

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"k8s.io/apimachinery/pkg/api/equality"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/config"
)

// plannedDefaultOperator plans `resource "nodemaintenance_operator" "x" {}`
// as Terraform does, through the plugin protocol, and returns the options
// its apply would install: the schema's defaults as the framework fills them
// in, not a copy of them.
func plannedDefaultOperator(t *testing.T) config.OperatorOptions {
	t.Helper()
	m := plannedDefaultOperatorModel(t)
	opts, diags := m.applyOptions(context.Background())
	if diags.HasError() {
		t.Fatalf("options of the planned operator: %v", diags)
	}
	return opts
}

// plannedDefaultOperatorModel is the planned model of a
// nodemaintenance_operator with no attributes set.
func plannedDefaultOperatorModel(t *testing.T) operatorResourceModel {
	t.Helper()
	ctx := context.Background()
	schemaResp := &resource.SchemaResponse{}
	(&OperatorResource{}).Schema(ctx, resource.SchemaRequest{}, schemaResp)
	sch := schemaResp.Schema
	typ := sch.Type().TerraformType(ctx).(tftypes.Object)
	values := map[string]tftypes.Value{}
	for name, attrType := range typ.AttributeTypes {
		values[name] = tftypes.NewValue(attrType, nil)
	}
	empty, err := tfprotov6.NewDynamicValue(typ, tftypes.NewValue(typ, values))
	if err != nil {
		t.Fatal(err)
	}
	prior, err := tfprotov6.NewDynamicValue(typ, tftypes.NewValue(typ, nil))
	if err != nil {
		t.Fatal(err)
	}
	server := providerserver.NewProtocol6(New("test")())()
	resp, err := server.PlanResourceChange(ctx, &tfprotov6.PlanResourceChangeRequest{
		TypeName: "nodemaintenance_operator", PriorState: &prior, Config: &empty, ProposedNewState: &empty,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range resp.Diagnostics {
		if d.Severity == tfprotov6.DiagnosticSeverityError {
			t.Fatalf("planning a nodemaintenance_operator with no attributes: %s: %s", d.Summary, d.Detail)
		}
	}
	planned, err := resp.PlannedState.Unmarshal(typ)
	if err != nil {
		t.Fatal(err)
	}
	var m operatorResourceModel
	if diags := (tfsdk.Plan{Schema: sch, Raw: planned}).Get(ctx, &m); diags.HasError() {
		t.Fatalf("read the planned operator: %v", diags)
	}
	return m
}

// The committed deploy/node-maintenance-operator.yaml is, object by object,
// what nodemaintenance_operator applies when no attribute is set: same
// kinds, names and order, and every field equal once the document is read
// back into the object's own Go type (strictly: an unknown field fails).
func TestManifestIsTheDefaultOperator(t *testing.T) {
	want, err := config.OperatorObjects(plannedDefaultOperator(t))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "..", "deploy", config.ManifestFile)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: run `make manifests` to write it", err)
	}
	docs := splitYAMLDocuments(t, raw)
	if len(docs) != len(want) {
		t.Fatalf("%s has %d objects, the default nodemaintenance_operator %d: run `make manifests`", path, len(docs), len(want))
	}
	for i, w := range want {
		got := reflect.New(reflect.TypeOf(w).Elem()).Interface().(client.Object)
		if err := yaml.UnmarshalStrict(docs[i], got); err != nil {
			t.Fatalf("object %d of %s is not a %s: %v", i, path, objectName(w), err)
		}
		// The manifest leaves out status, which nobody applies.
		clearStatus(w)
		if !equality.Semantic.DeepEqual(got, w) {
			gotYAML, _ := yaml.Marshal(got)
			wantYAML, _ := yaml.Marshal(w)
			t.Errorf("object %d of %s differs from the resource's %s: run `make manifests`.\nmanifest:\n%s\nresource:\n%s",
				i, path, objectName(w), gotYAML, wantYAML)
		}
	}
}

// clearStatus zeroes obj's status field, if it has one.
func clearStatus(obj client.Object) {
	v := reflect.ValueOf(obj).Elem()
	if f := v.FieldByName("Status"); f.IsValid() && f.CanSet() {
		f.Set(reflect.Zero(f.Type()))
	}
}

// splitYAMLDocuments returns the documents of a YAML stream that hold
// something: the header of comments alone is none.
func splitYAMLDocuments(t *testing.T, raw []byte) [][]byte {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if err == io.EOF {
			return docs
		}
		if err != nil {
			t.Fatal(err)
		}
		var content map[string]any
		if err := yaml.Unmarshal(doc, &content); err != nil {
			t.Fatal(err)
		}
		if len(content) > 0 {
			docs = append(docs, doc)
		}
	}
}
